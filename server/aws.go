package server

import (
	"net/http"
	"os/user"
	"time"

	"qshare/aws/awsquery"
	"qshare/aws/iam"
	"qshare/aws/logs"
	"qshare/aws/sagemaker"
	"qshare/aws/sts"
	"qshare/executor"
)

// routeSDK registers the AWS services that the SageMaker Python SDK calls
// beside Batch and S3 (docs/sagemaker-sdk.md): SageMaker and CloudWatch
// Logs (awsJson1_1, by X-Amz-Target, and by the signing name for a signed
// request without one, which the service then refuses in its own shape),
// STS and IAM (awsQuery, by the signing name; their bodies are forms).
func (sv *server) routeSDK(r *Router) {
	started := time.Now()
	var roles func() []string
	if r.auth != nil {
		roles = func() []string { return r.auth.Keys().Roles() }
	}
	session := "qshare"
	if u, err := user.Current(); err == nil && u.Username != "" {
		session = u.Username
	}
	form := []string{awsquery.ContentType}
	// Each service's refusals (the guard's, authentication's) in its own
	// shape: its error table is all that WriteError reads.
	smErr, logsErr := sagemaker.New(nil, nil, nil).WriteError, logs.New(logs.Config{}).WriteError
	stsErr, iamErr := sts.New(sts.Config{}).WriteError, iam.New(iam.Config{}).WriteError
	buildSM := func(t *Term) http.Handler { return t.Health.Gate(sagemaker.New(t.Daemon, t.Executor.Logs, t.Log)) }
	buildLogs := func(t *Term) http.Handler {
		c := logs.Config{Jobs: t.Daemon, Logs: t.Executor.Logs, Log: t.Log}
		if il, ok := t.Executor.(executor.InstanceLogger); ok {
			c.InstanceLogs = il.InstanceLogs
		}
		return t.Health.Gate(logs.New(c))
	}
	r.Handle(Route{Name: "sagemaker", Match: Match{Service: sagemaker.SigningName, Target: sagemaker.TargetPrefix}, BodyTypes: []string{"application/x-amz-json-1.1"}, WriteError: smErr, Build: buildSM})
	r.Handle(Route{Name: "sagemaker", Match: Match{Service: sagemaker.SigningName}, BodyTypes: []string{"application/x-amz-json-1.1"}, WriteError: smErr, Build: buildSM})
	r.Handle(Route{Name: "cloudwatch-logs", Match: Match{Service: logs.SigningName, Target: logs.TargetPrefix}, BodyTypes: []string{"application/x-amz-json-1.1"}, WriteError: logsErr, Build: buildLogs})
	r.Handle(Route{Name: "cloudwatch-logs", Match: Match{Service: logs.SigningName}, BodyTypes: []string{"application/x-amz-json-1.1"}, WriteError: logsErr, Build: buildLogs})
	r.Handle(Route{Name: "sts", Match: Match{Service: sts.SigningName}, BodyTypes: form, WriteError: stsErr, Build: func(t *Term) http.Handler {
		return sts.New(sts.Config{AccountID: t.Settings.AccountID, Session: session, Log: t.Log})
	}})
	r.Handle(Route{Name: "iam", Match: Match{Service: iam.SigningName}, BodyTypes: form, WriteError: iamErr, Build: func(t *Term) http.Handler {
		return iam.New(iam.Config{AccountID: t.Settings.AccountID, Roles: roles, Started: started, Log: t.Log})
	}})
}
