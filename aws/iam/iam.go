// Package iam is the IAM endpoint of qshare, as far as the SageMaker SDK's
// role resolution asks it (sagemaker.core.helper.iam_role_resolver and
// Session.get_caller_identity_arn): GetRole for the roles that qshare's
// principals act as (the auth file's role, or DefaultRole without --auth),
// and SimulatePrincipalPolicy, which it refuses with AccessDenied.
//
// Why AccessDenied and not qshare's policy engine: the SDK simulates what
// the training job's role may do inside the job (s3:PutObject on the
// default bucket, sagemaker:CreateTrainingJob, ECR and CloudWatch
// actions). qshare enforces none of that: its policies (--auth) govern
// qshare's own operations, for principals, not what a job's role may do.
// Evaluating them would deny every action the file does not name, and the
// SDK would refuse the role (RoleValidationError); allowing everything
// would claim a check that nobody makes. AccessDenied says "cannot tell",
// which the SDK accepts: it logs that it could not verify the role and
// goes on. The protocol is awsQuery (package awsquery).
package iam

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/xml"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"qshare"
	"qshare/auth"
	"qshare/aws/awsquery"
)

// SigningName is the service of an IAM request's SigV4 credential scope.
const SigningName = "iam"

// DefaultRole is the role of the one local user of a server without
// --auth: STS GetCallerIdentity answers it as an assumed role, so the
// SageMaker SDK finds an execution role with nothing configured.
const DefaultRole = "QshareExecutionRole"

// Namespace is the XML namespace of IAM's answers.
const Namespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// Config is what New needs.
type Config struct {
	AccountID string
	// Roles returns the roles the auth file names; nil without --auth,
	// when DefaultRole is the one role.
	Roles func() []string
	// Started is when the server started: the roles' CreateDate, since
	// they exist for as long as the server does.
	Started time.Time
	Log     *slog.Logger
}

var errorTable = awsquery.WithCommonErrors(map[qshare.ErrorCode]awsquery.ErrorType{
	qshare.EINVALID:  {Code: "ValidationError", Status: http.StatusBadRequest},
	qshare.ECONFLICT: {Code: "ValidationError", Status: http.StatusBadRequest},
	qshare.ENOTFOUND: {Code: "NoSuchEntity", Status: http.StatusNotFound},
})

// New returns the IAM endpoint.
func New(cfg Config) *awsquery.Service {
	h := &handler{cfg}
	return &awsquery.Service{
		Name:      "IAM",
		Namespace: Namespace,
		Errors:    errorTable,
		Log:       cfg.Log,
		Actions: map[string]awsquery.Action{
			"GetRole":                 h.getRole,
			"SimulatePrincipalPolicy": h.simulate,
		},
	}
}

// RoleARN returns the ARN of the role named name in account.
func RoleARN(account, name string) string { return "arn:aws:iam::" + account + ":role/" + name }

// RoleID returns the stable unique ID IAM gives a role ("AROA" and 17
// letters and digits), here made of the account and the name.
func RoleID(account, name string) string {
	sum := sha256.Sum256([]byte(account + "/role/" + name))
	return "AROA" + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

// trustPolicy is every role's AssumeRolePolicyDocument: SageMaker may
// assume it, which is what the SDK checks of a training job's role.
const trustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

type handler struct{ cfg Config }

func (h *handler) roles() []string {
	if h.cfg.Roles == nil {
		return []string{DefaultRole}
	}
	return h.cfg.Roles()
}

type getRoleResult struct {
	XMLName xml.Name `xml:"GetRoleResult"`
	Role    role     `xml:"Role"`
}

type role struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	Arn                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
	Description              string `xml:"Description"`
	MaxSessionDuration       int    `xml:"MaxSessionDuration"`
}

func (h *handler) getRole(ctx context.Context, p url.Values) (any, error) {
	name := p.Get("RoleName")
	if name == "" || !auth.ValidRoleName(name) {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value at 'roleName' failed to satisfy constraint: Member must have length between 1 and 64 and satisfy the pattern [\\w+=,.@-]+")
	}
	arn := RoleARN(h.cfg.AccountID, name)
	if err := auth.Authorize(ctx, "iam:GetRole", arn); err != nil {
		return nil, err
	}
	if !slices.Contains(h.roles(), name) {
		return nil, qshare.Errorf(qshare.ENOTFOUND, "The role with name %s cannot be found: qshare knows the roles that its auth file's principals act as (role:), or %s without --auth", name, DefaultRole)
	}
	return getRoleResult{Role: role{Path: "/", RoleName: name, RoleID: RoleID(h.cfg.AccountID, name), Arn: arn,
		CreateDate:               h.cfg.Started.UTC().Format(time.RFC3339),
		AssumeRolePolicyDocument: url.QueryEscape(trustPolicy), MaxSessionDuration: 3600,
		Description: "A role of qshare's principals, for the SageMaker SDK's execution role"}}, nil
}

// simulate refuses SimulatePrincipalPolicy (see the package's comment).
func (h *handler) simulate(ctx context.Context, p url.Values) (any, error) {
	src := p.Get("PolicySourceArn")
	if src == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value null at 'policySourceArn' failed to satisfy constraint: Member must not be null")
	}
	caller := "the caller"
	if pr := auth.PrincipalFrom(ctx); pr != nil {
		caller = pr.ARN
	}
	if len(src) > 200 {
		src = src[:200] + "…"
	}
	return nil, qshare.Errorf(qshare.EDENIED, "User: %s is not authorized to perform: iam:SimulatePrincipalPolicy on resource: %s: qshare does not simulate what a training job's role may do (S3, ECR, CloudWatch), since it does not enforce it; its policies (--auth) govern qshare's own operations only", caller, strings.ToValidUTF8(src, "?"))
}
