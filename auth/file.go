package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"go.yaml.in/yaml/v3"
)

// Principal is a user of the server as the auth file names it.
type Principal struct {
	// Name is the user's name, the NAME of arn:aws:iam::ACCOUNT:user/NAME.
	Name string
	// ARN is the user's ARN in the server's account.
	ARN string
	// UnixUser is the local user the principal's jobs are to run as. It is
	// read and checked for form; the process executor does not use it yet.
	UnixUser string
	// Role is the IAM role the principal acts as, for the SageMaker SDK
	// (the auth file's role): STS GetCallerIdentity then answers the
	// role's assumed-role ARN, arn:aws:sts::ACCOUNT:assumed-role/ROLE/NAME,
	// as in SageMaker Studio, from which the SDK takes its execution role,
	// and IAM GetRole knows the role. Empty: the principal is a user.
	Role string
	// Policies are the principal's policies, in the order the file gives.
	Policies []*Policy
	// Limits bound the principal's requests; zero values bound nothing.
	Limits Limits
}

// Limits are a principal's limits in the auth file.
type Limits struct {
	// RequestsPerSecond is the sustained rate of requests the principal
	// may make; a request beyond it is refused with TooManyRequestsException
	// (HTTP 429). 0: no limit.
	RequestsPerSecond float64 `yaml:"requestsPerSecond"`
	// Burst is how many requests may come at once above the rate; 0 means
	// RequestsPerSecond (at least 1).
	Burst int `yaml:"burst"`
	// UnfinishedJobs is the most jobs the principal may have submitted and
	// not yet seen finish (SUBMITTED to RUNNING); a submit beyond it is
	// refused with a ClientException that names this limit. 0: no limit.
	UnfinishedJobs int `yaml:"unfinishedJobs"`
}

// Keyring is a loaded auth file: the principals by access key. It is
// immutable once made, and so safe for concurrent use.
type Keyring struct {
	account string
	keys    map[string]*keyEntry // by access key id
	names   map[string]*Principal
}

// keyEntry is one access key of a Keyring.
type keyEntry struct {
	owner  *Principal
	secret string
	// signer recomputes this key's signatures. One per key, made with the
	// keyring: the SDK's signer caches the signing key it derives by region,
	// service, access key id and day, not by secret, so a signer shared by
	// all keys would re-derive on every change of key, and one that
	// outlived a reload would keep accepting a secret replaced under the
	// same key id until the day ends.
	signer *v4.Signer
}

// Principal returns the principal of the access key id, and its secret.
func (k *Keyring) Principal(keyID string) (*Principal, string, bool) {
	e, ok := k.keys[keyID]
	if !ok {
		return nil, "", false
	}
	return e.owner, e.secret, true
}

// Principals returns the names of the principals, sorted.
func (k *Keyring) Principals() []string {
	var ns []string
	for n := range k.names {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// The auth file's shape (see docs/security.md). Members are matched
// exactly: an unknown one is an error that names its line, so a misspelt
// "Efect" cannot silently weaken a policy.
type fileDoc struct {
	Principals []filePrincipal       `yaml:"principals"`
	Policies   map[string]filePolicy `yaml:"policies"`
}

type filePrincipal struct {
	Name       string    `yaml:"name"`
	AccessKeys []fileKey `yaml:"accessKeys"`
	UnixUser   string    `yaml:"unixUser"`
	Role       string    `yaml:"role"`
	Policies   []string  `yaml:"policies"`
	Limits     fileLimit `yaml:"limits"`
	line       int
}

type fileLimit struct {
	Limits `yaml:",inline"`
	line   int
}

func (l *fileLimit) UnmarshalYAML(n *yaml.Node) error {
	return decodeStrictAt(n, &l.Limits, &l.line)
}

func (p *filePrincipal) UnmarshalYAML(n *yaml.Node) error {
	type plain filePrincipal
	return decodeStrictAt(n, (*plain)(p), &p.line)
}

type fileKey struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
	line   int
}

func (k *fileKey) UnmarshalYAML(n *yaml.Node) error {
	type plain fileKey
	return decodeStrictAt(n, (*plain)(k), &k.line)
}

type filePolicy struct {
	Version   string          `yaml:"Version"`
	ID        string          `yaml:"Id"`
	Statement []fileStatement `yaml:"Statement"`
	line      int
}

func (p *filePolicy) UnmarshalYAML(n *yaml.Node) error {
	type plain struct {
		Version   string    `yaml:"Version"`
		ID        string    `yaml:"Id"`
		Statement yaml.Node `yaml:"Statement"`
	}
	var x plain
	if err := decodeStrict(n, &x); err != nil {
		return err
	}
	p.Version, p.ID, p.line = x.Version, x.ID, n.Line
	switch x.Statement.Kind {
	case 0:
	case yaml.MappingNode: // one statement, as IAM allows
		var s fileStatement
		if err := x.Statement.Decode(&s); err != nil {
			return err
		}
		p.Statement = []fileStatement{s}
	default:
		if err := x.Statement.Decode(&p.Statement); err != nil {
			return err
		}
	}
	return nil
}

type fileStatement struct {
	Sid         string      `yaml:"Sid"`
	Effect      string      `yaml:"Effect"`
	Action      stringOrSeq `yaml:"Action"`
	Resource    stringOrSeq `yaml:"Resource"`
	NotAction   yaml.Node   `yaml:"NotAction"`
	NotResource yaml.Node   `yaml:"NotResource"`
	Principal   yaml.Node   `yaml:"Principal"`
	NotPrinc    yaml.Node   `yaml:"NotPrincipal"`
	Condition   yaml.Node   `yaml:"Condition"`
	line        int
}

func (s *fileStatement) UnmarshalYAML(n *yaml.Node) error {
	type plain fileStatement
	return decodeStrictAt(n, (*plain)(s), &s.line)
}

// stringOrSeq is IAM's "a string or a list of strings".
type stringOrSeq struct {
	v    []string
	set  bool
	line int
}

func (l *stringOrSeq) UnmarshalYAML(n *yaml.Node) error {
	l.set, l.line = true, n.Line
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		l.v = []string{s}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: give a string or a list of strings", n.Line)
	}
	return n.Decode(&l.v)
}

// decodeStrictAt is decodeStrict that also keeps the node's line in
// *line, for the errors of a later check of v.
func decodeStrictAt(n *yaml.Node, v any, line *int) error {
	if err := decodeStrict(n, v); err != nil {
		return err
	}
	*line = n.Line
	return nil
}

// decodeStrict decodes a mapping node into the struct v points to,
// refusing a member v has no yaml tag for, with that member's line
// (yaml.v3's KnownFields reaches only the top-level decoder, not a node
// decoded in an UnmarshalYAML).
func decodeStrict(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: expected a mapping (key: value members)", n.Line)
	}
	t := reflect.TypeOf(v).Elem()
	known := map[string]bool{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			known[tag] = true
			names = append(names, tag)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !known[k.Value] {
			return fmt.Errorf("line %d: member %q is not known here (members: %s)", k.Line, k.Value, strings.Join(names, ", "))
		}
	}
	return n.Decode(v)
}

// LoadFile reads and checks the auth file at path for a server whose
// account is account. It refuses a file that others than its owner may
// read or write, one owned by a user other than the server's and root, and
// one that is malformed; its errors name the file, and the line and member
// at fault.
func LoadFile(path, account string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("auth file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("auth file %s holds secret keys but others than its owner may read or change it (mode %04o): make it private with chmod 600 %s", path, perm, path)
	}
	if err := checkOwner(st); err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("auth file %s is larger than %d bytes", path, maxFileBytes)
	}
	k, err := Parse(b, account)
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return k, nil
}

// maxFileBytes bounds the auth file: 4 MiB is thousands of principals.
const maxFileBytes = 4 << 20

// Parse reads an auth file's contents (YAML, or JSON, which YAML reads too)
// for a server whose account is account, and checks it: every principal has
// a valid, unique name, every access key a valid id (16 to 128 upper-case
// letters and digits), unique across the file, and a secret of at least 20
// characters; every policy a principal names exists; every statement has
// Effect Allow or Deny, an Action and a Resource. NotAction, NotResource,
// Principal and Condition are refused, since qshare does not implement them
// and ignoring them would grant more than the file says.
func Parse(b []byte, account string) (*Keyring, error) {
	var doc fileDoc
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty: give principals and policies (docs/security.md)")
		}
		return nil, fmt.Errorf("%w (members: principals, policies; a principal has name, accessKeys, unixUser, role, policies, limits (requestsPerSecond, burst, unfinishedJobs); a statement has Sid, Effect, Action, Resource)", err)
	}
	if len(doc.Principals) == 0 {
		return nil, errors.New("principals is missing or empty: name at least one principal")
	}
	policies := map[string]*Policy{}
	for name, fp := range doc.Policies {
		p, err := checkPolicy(name, fp)
		if err != nil {
			return nil, err
		}
		policies[name] = p
	}
	k := &Keyring{account: account, keys: map[string]*keyEntry{}, names: map[string]*Principal{}}
	for i, fp := range doc.Principals {
		where := fmt.Sprintf("line %d: principals[%d]", fp.line, i)
		if !validUserName(fp.Name) {
			return nil, fmt.Errorf("%s: name %q is not valid: give 1 to 64 letters, digits and +=,.@_-", where, fp.Name)
		}
		if k.names[fp.Name] != nil {
			return nil, fmt.Errorf("%s: name %q is given twice", where, fp.Name)
		}
		if fp.UnixUser != "" && !validUnixUser(fp.UnixUser) {
			return nil, fmt.Errorf("%s (%s): unixUser %q is not a user name or uid", where, fp.Name, fp.UnixUser)
		}
		if fp.Role != "" && !ValidRoleName(fp.Role) {
			return nil, fmt.Errorf("%s (%s): role %q is not a valid IAM role name: give 1 to 64 letters, digits and +=,.@_-", where, fp.Name, fp.Role)
		}
		// !(rate >= 0) refuses NaN (.nan in YAML, which would throttle every
		// request) with the negative rates; .inf is no limit in disguise.
		if l := fp.Limits; !(l.RequestsPerSecond >= 0) || math.IsInf(l.RequestsPerSecond, 1) || l.Burst < 0 || (l.Burst > 0 && l.RequestsPerSecond == 0) {
			return nil, fmt.Errorf("line %d: principals[%d] (%s).limits: requestsPerSecond must be a number more than 0 (or left out for no limit), and burst 1 or more with it", l.line, i, fp.Name)
		}
		if l := fp.Limits; l.UnfinishedJobs < 0 {
			return nil, fmt.Errorf("line %d: principals[%d] (%s).limits: unfinishedJobs %d is not valid: give 1 or more (or leave it out for no limit)", l.line, i, fp.Name, l.UnfinishedJobs)
		}
		p := &Principal{Name: fp.Name, ARN: "arn:aws:iam::" + account + ":user/" + fp.Name, UnixUser: fp.UnixUser, Role: fp.Role, Limits: fp.Limits.Limits}
		for _, pn := range fp.Policies {
			pol := policies[pn]
			if pol == nil {
				return nil, fmt.Errorf("%s (%s): policy %q is not defined under policies", where, fp.Name, pn)
			}
			p.Policies = append(p.Policies, pol)
		}
		for j, key := range fp.AccessKeys {
			kwhere := fmt.Sprintf("line %d: principals[%d] (%s).accessKeys[%d]", key.line, i, fp.Name, j)
			if !validKeyID(key.ID) {
				return nil, fmt.Errorf("%s: id %q is not valid: give 16 to 128 upper-case letters and digits, as qshare auth new-key makes", kwhere, key.ID)
			}
			if len(key.Secret) < 20 || strings.ContainsAny(key.Secret, " \t\r\n") {
				return nil, fmt.Errorf("%s: the secret of %s is not valid: give at least 20 characters without spaces, as qshare auth new-key makes", kwhere, key.ID)
			}
			if other := k.keys[key.ID]; other != nil {
				return nil, fmt.Errorf("%s: access key %s is given twice (also for %s)", kwhere, key.ID, other.owner.Name)
			}
			k.keys[key.ID] = &keyEntry{owner: p, secret: key.Secret, signer: v4.NewSigner()}
		}
		k.names[fp.Name] = p
	}
	return k, nil
}

func checkPolicy(name string, fp filePolicy) (*Policy, error) {
	where := fmt.Sprintf("line %d: policies.%s", fp.line, name)
	if name == "" {
		return nil, fmt.Errorf("%s: a policy needs a name", where)
	}
	switch fp.Version {
	case "2012-10-17", "2008-10-17":
	case "":
		return nil, fmt.Errorf("%s: Version is required: use \"2012-10-17\"", where)
	default:
		return nil, fmt.Errorf("%s: Version %q is not known: use \"2012-10-17\"", where, fp.Version)
	}
	if len(fp.Statement) == 0 {
		return nil, fmt.Errorf("%s: Statement is missing or empty", where)
	}
	p := &Policy{Name: name}
	for i, fs := range fp.Statement {
		swhere := fmt.Sprintf("line %d: policies.%s.Statement[%d]", fs.line, name, i)
		for _, x := range []struct {
			member string
			n      yaml.Node
		}{{"NotAction", fs.NotAction}, {"NotResource", fs.NotResource}, {"Principal", fs.Principal}, {"NotPrincipal", fs.NotPrinc}} {
			if x.n.Kind != 0 {
				return nil, fmt.Errorf("%s: %s is not supported by qshare: write the statement with Action and Resource only (an identity policy applies to its principal; list what is allowed, and deny with Effect: Deny)", swhere, x.member)
			}
		}
		if fs.Effect != string(Allow) && fs.Effect != string(Deny) {
			return nil, fmt.Errorf("%s: Effect %q is not valid: use Allow or Deny", swhere, fs.Effect)
		}
		if len(fs.Action.v) == 0 {
			return nil, fmt.Errorf("%s: Action is required: give an action such as batch:SubmitServiceJob, a pattern such as batch:Describe*, or a list of them", swhere)
		}
		for _, a := range fs.Action.v {
			svc, act, ok := strings.Cut(a, ":")
			if a != "*" && (!ok || svc == "" || act == "" || strings.ContainsAny(a, " /")) {
				return nil, fmt.Errorf("%s: Action %q is not valid: write SERVICE:ACTION, such as batch:SubmitServiceJob or batch:*", swhere, a)
			}
		}
		if len(fs.Resource.v) == 0 {
			return nil, fmt.Errorf("%s: Resource is required: give an ARN, an ARN pattern such as arn:aws:batch:*:*:job-queue/training/quota-share/QS1, or \"*\"", swhere)
		}
		for _, r := range fs.Resource.v {
			if r != "*" && !strings.HasPrefix(r, "arn:") {
				return nil, fmt.Errorf("%s: Resource %q is not valid: give an ARN (arn:...), an ARN pattern, or \"*\"", swhere, r)
			}
		}
		cond, err := parseCondition(&fs.Condition, swhere)
		if err != nil {
			return nil, err
		}
		p.Statement = append(p.Statement, Statement{Sid: fs.Sid, Effect: Effect(fs.Effect), Action: fs.Action.v, Resource: fs.Resource.v, cond: cond})
	}
	return p, nil
}

// ValidRoleName reports whether s is a valid IAM role name: 1 to 64
// letters, digits and +=,.@_-, IAM's rule (the same as a user name's).
func ValidRoleName(s string) bool { return validUserName(s) }

// Roles returns the roles the principals act as, sorted, each once.
func (k *Keyring) Roles() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range k.names {
		if p.Role != "" && !seen[p.Role] {
			seen[p.Role] = true
			out = append(out, p.Role)
		}
	}
	sort.Strings(out)
	return out
}

// ValidPrincipalName reports whether s is a valid principal name: IAM's
// rule for a user name, 1 to 64 letters, digits and +=,.@_-.
func ValidPrincipalName(s string) bool { return validUserName(s) }

// validUserName is IAM's rule for a user name.
func validUserName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+=,.@_-", c)) {
			return false
		}
	}
	return true
}

// validUnixUser accepts a POSIX user name or a uid.
func validUnixUser(s string) bool {
	if len(s) > 32 || s == "" || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validKeyID is AWS's form of an access key id.
func validKeyID(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
