package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	cwl "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	awssts "github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"qshare/auth"
	"qshare/aws/iam"
	"qshare/aws/logs"
)

// TestSDKServices: each AWS service the SageMaker SDK calls answers on the
// one port, routed by the credential scope and X-Amz-Target, with dummy
// credentials and no --auth; then with --auth, as the principal's role.
func TestSDKServices(t *testing.T) {
	ctx := context.Background()
	base := "http://" + serveAt(t, simServeSettings(t))
	waitReady(t, base)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("dummy", "dummy", ""), BaseEndpoint: aws.String(base),
		Retryer: func() aws.Retryer { return aws.NopRetryer{} }}
	id, err := awssts.NewFromConfig(cfg).GetCallerIdentity(ctx, &awssts.GetCallerIdentityInput{})
	serveMust(t, err)
	if !strings.Contains(aws.ToString(id.Arn), ":assumed-role/"+iam.DefaultRole+"/") || aws.ToString(id.Account) != "000000000000" {
		t.Errorf("GetCallerIdentity without --auth: %s %s", aws.ToString(id.Arn), aws.ToString(id.Account))
	}
	role, err := awsiam.NewFromConfig(cfg).GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String(iam.DefaultRole)})
	serveMust(t, err)
	if aws.ToString(role.Role.Arn) != "arn:aws:iam::000000000000:role/"+iam.DefaultRole {
		t.Errorf("GetRole: %s", aws.ToString(role.Role.Arn))
	}
	smc := sm.NewFromConfig(cfg)
	list, err := smc.ListTrainingJobs(ctx, &sm.ListTrainingJobsInput{})
	serveMust(t, err)
	if len(list.TrainingJobSummaries) != 0 {
		t.Errorf("ListTrainingJobs on an empty server: %d", len(list.TrainingJobSummaries))
	}
	_, err = smc.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("e"), EndpointConfigName: aws.String("c")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnknownOperationException" || !strings.Contains(ae.ErrorMessage(), "CreateEndpoint") {
		t.Errorf("CreateEndpoint: %v, want UnknownOperationException naming it", err)
	}
	streams, err := cwl.NewFromConfig(cfg).DescribeLogStreams(ctx, &cwl.DescribeLogStreamsInput{LogGroupName: aws.String(logs.Group)})
	serveMust(t, err)
	if len(streams.LogStreams) != 0 {
		t.Errorf("DescribeLogStreams on an empty server: %d", len(streams.LogStreams))
	}

	// With --auth: the principal's role, and its signature checked for sts.
	s := simServeSettings(t)
	s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	k, err := auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte("principals: [{name: alice, role: TeamARole, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}]}]\n"), 0o600))
	base = "http://" + serveAt(t, s)
	waitReady(t, base)
	cfg.BaseEndpoint = aws.String(base)
	cfg.Credentials = credentials.NewStaticCredentialsProvider(k.ID, k.Secret, "")
	id, err = awssts.NewFromConfig(cfg).GetCallerIdentity(ctx, &awssts.GetCallerIdentityInput{})
	serveMust(t, err)
	if aws.ToString(id.Arn) != "arn:aws:sts::000000000000:assumed-role/TeamARole/alice" {
		t.Errorf("GetCallerIdentity with --auth: %s", aws.ToString(id.Arn))
	}
	cfg.Credentials = credentials.NewStaticCredentialsProvider(k.ID, "wrong-secret-wrong-secret", "")
	if _, err := awssts.NewFromConfig(cfg).GetCallerIdentity(ctx, &awssts.GetCallerIdentityInput{}); err == nil {
		t.Error("GetCallerIdentity with a wrong secret succeeded")
	}
}
