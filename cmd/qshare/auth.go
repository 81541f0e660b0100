package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"qshare/auth"
)

var authCmd = &cobra.Command{
	Use:   "auth",
	Short: "Manage the access keys of qshare serve --auth",
	Long: `auth helps with the auth file of qshare serve --auth: the principals, their
access keys, and their IAM-style policies (see docs/security.md).`,
	Args: cobra.NoArgs,
}

var newKeyCmd = &cobra.Command{
	Use:   "new-key NAME",
	Short: "Print a new access key pair for principal NAME",
	Long: `new-key prints a new access key pair, drawn from the system's secure random
numbers, as an entry of the auth file's principals: paste it into the file
(or add its accessKeys entry to NAME's), keep the file mode 600, and send
SIGHUP to the server to load it. Give the principal the pair as its AWS
credentials (aws configure, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).

The id has 20 characters (AKIA and 16 of base32), the secret 40 (base64).
Nothing is written anywhere: the secret exists only in this output.`,
	Example: `  qshare auth new-key alice >> qshare-auth.yaml   # then edit it into principals
  kill -HUP $(pidof qshare)`,
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if !auth.ValidPrincipalName(name) {
			return fmt.Errorf("%q is not a principal name: give 1 to 64 letters, digits and +=,.@_-", name)
		}
		k, err := auth.NewKey()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "  # a new access key for %s, made by qshare auth new-key\n  - name: %s\n    accessKeys:\n      - id: %s\n        secret: %s\n", name, name, k.ID, k.Secret)
		return err
	},
}

func init() {
	authCmd.AddCommand(newKeyCmd)
	rootCmd.AddCommand(authCmd)
}
