package sagemaker

import (
	"fmt"
	"regexp"
)

// SDKConfigVariable is the environment variable through which the
// SageMaker Python SDK reads a user's config file (sagemaker.core.config).
const SDKConfigVariable = "SAGEMAKER_USER_CONFIG_OVERRIDE"

// bucketName is S3's rule for a bucket name: 3 to 63 lower-case letters,
// digits, dots and hyphens, starting and ending with a letter or digit.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// DefaultBucket is the bucket the SDK would make for itself in region and
// account (Session.generate_default_sagemaker_bucket_name).
func DefaultBucket(region, account string) string {
	return "sagemaker-" + region + "-" + account
}

// SDKConfig returns the SageMaker Python SDK's config file (schema 1.0)
// that names bucket as the Session's default bucket
// (SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket): the one setting
// a user of qshare needs, because the SDK's Session.default_bucket() would
// otherwise ask STS at the region's fixed AWS address for the account,
// which AWS_ENDPOINT_URL does not redirect. It fails for a name S3 would
// refuse.
func SDKConfig(bucket string) ([]byte, error) {
	if !bucketName.MatchString(bucket) {
		return nil, fmt.Errorf("%q is not an S3 bucket name: give 3 to 63 lower-case letters, digits, dots and hyphens", bucket)
	}
	return []byte("# The SageMaker Python SDK's config for qshare (qshare sdk-config):\n" +
		"# point " + SDKConfigVariable + " at this file.\n" +
		"SchemaVersion: '1.0'\n" +
		"SageMaker:\n" +
		"  PythonSDK:\n" +
		"    Modules:\n" +
		"      Session:\n" +
		"        DefaultS3Bucket: " + bucket + "\n"), nil
}
