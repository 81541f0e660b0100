package main

import (
	"github.com/spf13/cobra"

	"qshare"
)

var completionCmd = &cobra.Command{
	Use:   "completion bash|zsh|fish|powershell",
	Short: "Print the shell completion script",
	Long: `Print the script that teaches your shell to complete qshare's commands,
flags, job names, queues and shares (the latter by asking the server).

Load it in the current shell, or install it for every new one:

  bash:        source <(qshare completion bash)
               qshare completion bash > /etc/bash_completion.d/qshare
  zsh:         source <(qshare completion zsh)
               qshare completion zsh > "${fpath[1]}/_qshare"
  fish:        qshare completion fish | source
               qshare completion fish > ~/.config/fish/completions/qshare.fish
  powershell:  qshare completion powershell | Out-String | Invoke-Expression`,
	Example:               `  source <(qshare completion bash)`,
	Args:                  cobra.ExactArgs(1),
	ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
	DisableFlagsInUseLine: true,
	RunE: func(cmd *cobra.Command, args []string) error {
		w := cmd.OutOrStdout()
		switch args[0] {
		case "bash":
			return rootCmd.GenBashCompletionV2(w, true)
		case "zsh":
			return rootCmd.GenZshCompletion(w)
		case "fish":
			return rootCmd.GenFishCompletion(w, true)
		case "powershell":
			return rootCmd.GenPowerShellCompletionWithDesc(w)
		}
		return qshare.Errorf(qshare.EINVALID, "no completion for shell %q: use bash, zsh, fish or powershell", args[0])
	},
}

func init() {
	rootCmd.CompletionOptions.DisableDefaultCmd = true
	rootCmd.AddCommand(completionCmd)
}
