package sagemaker

import (
	"bytes"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestSDKConfig: the file is the SDK's schema 1.0 with the bucket at
// SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket, and a bad name is
// refused.
func TestSDKConfig(t *testing.T) {
	b, err := SDKConfig(DefaultBucket("us-east-1", "000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SchemaVersion string `yaml:"SchemaVersion"`
		SageMaker     struct {
			PythonSDK struct {
				Modules struct {
					Session struct {
						DefaultS3Bucket string `yaml:"DefaultS3Bucket"`
					} `yaml:"Session"`
				} `yaml:"Modules"`
			} `yaml:"PythonSDK"`
		} `yaml:"SageMaker"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != "1.0" || doc.SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket != "sagemaker-us-east-1-000000000000" {
		t.Errorf("config: %+v", doc)
	}
	for _, bad := range []string{"", "ab", "Upper", "a_b", "x\nSchemaVersion: '2.0'"} {
		if _, err := SDKConfig(bad); err == nil {
			t.Errorf("SDKConfig(%q) succeeded", bad)
		}
	}
}
