package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"qshare/aws/sagemaker"
)

var sdkConfigFlags struct {
	out, bucket, endpoint, region, account string
}

var sdkConfigCmd = &cobra.Command{
	Use:   "sdk-config",
	Short: "Write the SageMaker Python SDK's config file for this server, and print the variables to set",
	Long: `sdk-config writes the one file the SageMaker Python SDK needs to use qshare
(docs/sagemaker-sdk.md): its user config, which names the default S3 bucket
(SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket), because the SDK would
otherwise ask AWS's own STS address for the account to name it. Then it
prints the environment to set: AWS_ENDPOINT_URL (botocore's endpoint for
every service, so Batch, SageMaker, CloudWatch Logs, STS, IAM and S3 all
reach qshare), SAGEMAKER_USER_CONFIG_OVERRIDE (this file), the region, and
placeholder credentials for a server without --auth.`,
	Example: `  qshare sdk-config -o ~/.config/qshare/sagemaker.yaml
  eval "$(qshare sdk-config -o ~/.config/qshare/sagemaker.yaml)"   # and set them`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := sdkConfigFlags
		bucket := f.bucket
		if bucket == "" {
			bucket = sagemaker.DefaultBucket(f.region, f.account)
		}
		b, err := sagemaker.SDKConfig(bucket)
		if err != nil {
			return err
		}
		path, err := filepath.Abs(f.out)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "export AWS_ENDPOINT_URL=%s\nexport %s=%s\nexport AWS_DEFAULT_REGION=%s\n"+
			"# placeholder credentials for a server without --auth; with --auth, the principal's key:\n"+
			"export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-qshare} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-qshare}\n",
			f.endpoint, sagemaker.SDKConfigVariable, path, f.region)
		return err
	},
}

func init() {
	f := sdkConfigCmd.Flags()
	f.StringVarP(&sdkConfigFlags.out, "output", "o", "sagemaker-config.yaml", "the config `FILE` to write")
	f.StringVar(&sdkConfigFlags.bucket, "bucket", "", "the default S3 bucket (default: sagemaker-REGION-ACCOUNT, the name the SDK would give it)")
	f.StringVar(&sdkConfigFlags.endpoint, "endpoint", "http://127.0.0.1:8750", "the server's `URL`")
	f.StringVar(&sdkConfigFlags.region, "region", "us-east-1", "the server's region (qshare serve --region)")
	f.StringVar(&sdkConfigFlags.account, "account-id", "000000000000", "the server's account ID (qshare serve --account-id)")
	rootCmd.AddCommand(sdkConfigCmd)
}
