// Package sts is the STS endpoint of qshare: GetCallerIdentity, which the
// SageMaker SDK calls to learn its account and, from an assumed-role ARN
// as SageMaker Studio gives, its execution role. The protocol is awsQuery
// (package awsquery).
//
// With --auth the caller is the principal whose key signed the request: a
// principal with a role in the auth file is that role's session,
// arn:aws:sts::ACCOUNT:assumed-role/ROLE/NAME; one without is the user
// arn:aws:iam::ACCOUNT:user/NAME. Without --auth the one local user (the
// guard lets no other in) acts as iam.DefaultRole, in a session named
// after the server's user, so the SDK finds a role with nothing configured.
package sts

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"log/slog"
	"net/http"
	"net/url"

	"qshare"
	"qshare/auth"
	"qshare/aws/awsquery"
	"qshare/aws/iam"
)

// SigningName is the service of an STS request's SigV4 credential scope.
const SigningName = "sts"

// Namespace is the XML namespace of STS's answers.
const Namespace = "https://sts.amazonaws.com/doc/2011-06-15/"

// Config is what New needs.
type Config struct {
	AccountID string
	// Session names the session of the default role without --auth: the
	// server's local user name.
	Session string
	Log     *slog.Logger
}

var errorTable = awsquery.WithCommonErrors(map[qshare.ErrorCode]awsquery.ErrorType{
	qshare.EINVALID: {Code: "ValidationError", Status: http.StatusBadRequest},
})

// New returns the STS endpoint.
func New(cfg Config) *awsquery.Service {
	return &awsquery.Service{
		Name:      "STS",
		Namespace: Namespace,
		Errors:    errorTable,
		Log:       cfg.Log,
		Actions: map[string]awsquery.Action{
			"GetCallerIdentity": func(ctx context.Context, _ url.Values) (any, error) {
				return Identify(cfg, auth.PrincipalFrom(ctx)), nil
			},
		},
	}
}

// Identity is GetCallerIdentity's result.
type Identity struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

// Identify returns the identity of principal p (nil: the local user of a
// server without --auth).
func Identify(cfg Config, p *auth.Principal) Identity {
	acct := cfg.AccountID
	role, session := iam.DefaultRole, cfg.Session
	if session == "" {
		session = "qshare"
	}
	if p != nil {
		if p.Role == "" {
			return Identity{Arn: p.ARN, UserID: "AIDA" + id(acct+"/user/"+p.Name), Account: acct}
		}
		role, session = p.Role, p.Name
	}
	return Identity{Arn: "arn:aws:sts::" + acct + ":assumed-role/" + role + "/" + session,
		UserID: iam.RoleID(acct, role) + ":" + session, Account: acct}
}

func id(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:17]
}
