package web

import (
	"net/http"

	"qshare"
	"qshare/api"
	"qshare/auth"
)

// WhoAmIPath is where the server mounts WhoAmIHandler: a qshare extension,
// as sts:GetCallerIdentity is in AWS, that tells a signed-in page whose key
// it signs with.
const WhoAmIPath = "/qshare/v1/whoami"

// WhoAmI is the body of a successful GET WhoAmIPath.
type WhoAmI struct {
	// Authentication is true when the server authenticates requests.
	Authentication bool `json:"authentication"`
	// Principal is the ARN of the principal whose key signed the request
	// (arn:aws:iam::ACCOUNT:user/NAME); empty without authentication.
	Principal string `json:"principal"`
}

// WhoAmIHandler serves GET WhoAmIPath: the caller's principal. Like
// sts:GetCallerIdentity it needs no action of a policy: a principal allowed
// nothing still learns who it is, and nothing else. Another method or path
// is a ClientException.
func WhoAmIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on %s: use GET", r.Method, WhoAmIPath))
			return
		}
		if r.URL.Path != WhoAmIPath || r.URL.RawQuery != "" {
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "use GET %s, with no query string", WhoAmIPath))
			return
		}
		out := WhoAmI{}
		if p := auth.PrincipalFrom(r.Context()); p != nil {
			out = WhoAmI{Authentication: true, Principal: p.ARN}
		}
		writeJSON(w, out)
	})
}
