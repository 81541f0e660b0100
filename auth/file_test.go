package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleFile is the auth file, with real keys.
const exampleFile = `principals:
  - name: alice                    # arn:aws:iam::<account-id>:user/alice
    accessKeys:
      - id: AKIAQSHAREALICE00001
        secret: alicealicealicealicealicealicealice12345
    unixUser: alice
    policies: [team-a]
  - name: admin
    accessKeys: [{id: AKIAQSHAREADMIN00001, secret: adminadminadminadminadminadminadmin12345}]
    policies: [admin]
policies:
  team-a:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:SubmitServiceJob, batch:UpdateServiceJob, batch:TerminateServiceJob, batch:GetServiceJobLogs]
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS1
      - Effect: Allow
        Action: [batch:Describe*, batch:List*, batch:GetJobQueueSnapshot]
        Resource: "*"
  admin:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]
`

func TestParseExample(t *testing.T) {
	k, err := Parse([]byte(exampleFile), "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	p, secret, ok := k.Principal("AKIAQSHAREALICE00001")
	if !ok || p.Name != "alice" || secret != "alicealicealicealicealicealicealice12345" || p.UnixUser != "alice" {
		t.Fatalf("alice's key: %+v %q %v", p, secret, ok)
	}
	if p.ARN != "arn:aws:iam::123456789012:user/alice" {
		t.Errorf("ARN %s", p.ARN)
	}
	if len(p.Policies) != 1 || len(p.Policies[0].Statement) != 2 {
		t.Errorf("alice's policies: %+v", p.Policies)
	}
	if _, _, ok := k.Principal("AKIAQSHAREBOB0000001"); ok {
		t.Error("an unknown key was found")
	}
	if got := strings.Join(k.Principals(), ","); got != "admin,alice" {
		t.Errorf("Principals() = %s", got)
	}
}

// The same file as JSON loads the same.
func TestParseJSON(t *testing.T) {
	js := `{"principals": [{"name": "bob", "accessKeys": [{"id": "AKIAQSHAREBOB0000001", "secret": "bobbobbobbobbobbobbobbobbobbobbobbobbob1"}], "policies": ["p"]}],
 "policies": {"p": {"Version": "2012-10-17", "Statement": {"Effect": "Deny", "Action": "batch:*", "Resource": ["*"]}}}}`
	k, err := Parse([]byte(js), "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	p, _, ok := k.Principal("AKIAQSHAREBOB0000001")
	if !ok || len(p.Policies[0].Statement) != 1 || p.Policies[0].Statement[0].Effect != Deny {
		t.Fatalf("bob: %+v", p)
	}
}

func TestParseRefuses(t *testing.T) {
	key := "{id: AKIAQSHAREALICE00001, secret: alicealicealicealicealicealicealice12345}"
	pol := func(stmt string) string {
		return "principals: [{name: a, accessKeys: [" + key + "], policies: [p]}]\npolicies:\n  p:\n    Version: \"2012-10-17\"\n    Statement:\n      - " + stmt + "\n"
	}
	for _, c := range []struct{ file, want string }{
		{"", "empty"},
		{"principals: []", "principals is missing"},
		{"principals: [{name: a}]\nextra: 1", "line 2: field extra not found"},
		{"principals:\n  - name: a\n    acessKeys: []", `line 3: member "acessKeys" is not known`},
		{"principals: [{name: 'a b'}]", `name "a b" is not valid`},
		{"principals: [{name: a}, {name: a}]", `name "a" is given twice`},
		{"principals: [{name: a, policies: [nope]}]", `policy "nope" is not defined`},
		{"principals: [{name: a, accessKeys: [{id: akiaqshare00000001, secret: alicealicealicealicealice}]}]", "id \"akiaqshare00000001\" is not valid"},
		{"principals: [{name: a, accessKeys: [{id: AKIAQSHAREALICE00001, secret: short}]}]", "secret of AKIAQSHAREALICE00001 is not valid"},
		{"principals: [{name: a, accessKeys: [" + key + "]}, {name: b, accessKeys: [" + key + "]}]", "given twice (also for a)"},
		{"principals: [{name: a, unixUser: 'x y'}]", `unixUser "x y"`},
		{pol("{Effect: Allow, NotAction: batch:Submit*, Resource: '*'}"), "line 6: policies.p.Statement[0]: NotAction is not supported"},
		{pol("{Effect: Allow, Action: batch:*, NotResource: '*'}"), "NotResource is not supported"},
		{pol("{Effect: Allow, Action: batch:*, Resource: '*', Condition: {Bool: {x: y}}}"), "Condition operator \"Bool\" is not supported"},
		{pol("{Effect: allow, Action: batch:*, Resource: '*'}"), `Effect "allow" is not valid`},
		{pol("{Effect: Allow, Resource: '*'}"), "Action is required"},
		{pol("{Effect: Allow, Action: batch:*}"), "Resource is required"},
		{pol("{Effect: Allow, Action: SubmitServiceJob, Resource: '*'}"), `Action "SubmitServiceJob" is not valid`},
		{pol("{Effect: Allow, Action: batch:*, Resource: job-queue/x}"), `Resource "job-queue/x" is not valid`},
		{pol("{Efect: Allow, Action: batch:*, Resource: '*'}"), `line 6: member "Efect" is not known`},
		{pol("{Effect: Allow, Action: {a: b}, Resource: '*'}"), "give a string or a list of strings"},
		{"principals: [{name: a, policies: [p]}]\npolicies: {p: {Statement: [{Effect: Allow, Action: '*', Resource: '*'}]}}", "Version is required"},
	} {
		_, err := Parse([]byte(c.file), "000000000000")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.file, err, c.want)
		}
	}
}

func TestLoadFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(path, []byte(exampleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path, "000000000000"); err != nil {
		t.Fatalf("a private file: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFile(path, "000000000000")
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want a refusal that says chmod 600", mode, err)
		}
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "none.yaml"), "000000000000"); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestNewKey(t *testing.T) {
	a, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewKey()
	if len(a.ID) != 20 || !strings.HasPrefix(a.ID, "AKIA") || !validKeyID(a.ID) || len(a.Secret) != 40 {
		t.Fatalf("key %+v is not of the AWS form", a)
	}
	if a.ID == b.ID || a.Secret == b.Secret {
		t.Fatal("two keys are the same")
	}
	file := "principals: [{name: x, accessKeys: [{id: " + a.ID + ", secret: \"" + a.Secret + "\"}]}]"
	k, err := Parse([]byte(file), "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if _, s, ok := k.Principal(a.ID); !ok || s != a.Secret {
		t.Fatal("the new key does not load back")
	}
}

// TestRole: a principal's role is read, checked and listed once.
func TestRole(t *testing.T) {
	k, err := Parse([]byte("principals:\n  - {name: a, role: TrainRole, accessKeys: [{id: AKIAQSHAREAAAAA00001, secret: aaaaaaaaaaaaaaaaaaaaaaaa}]}\n  - {name: b, role: TrainRole}\n  - {name: c}\n"), "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := k.Principal("AKIAQSHAREAAAAA00001")
	if p.Role != "TrainRole" || fmt.Sprint(k.Roles()) != "[TrainRole]" {
		t.Errorf("role %q, roles %v", p.Role, k.Roles())
	}
	if _, err := Parse([]byte("principals: [{name: a, role: 'bad role'}]"), "123456789012"); err == nil || !strings.Contains(err.Error(), `role "bad role" is not a valid IAM role name`) {
		t.Errorf("bad role: %v", err)
	}
}
