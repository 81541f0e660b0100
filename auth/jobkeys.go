package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// JobKeys are the S3 access keys of running attempts on a server without
// authentication (issue 31, point 4). Without --auth the Guard serves
// only the server's own user, and a job that runs as another user
// (--run-as) could not reach the embedded S3 store to stage its data and
// upload its model. Each attempt gets a key of its own (Grant), which the
// Guard takes from another local user for the embedded store only (a
// request signed for s3), verified as --auth verifies a request, with
// the rights of the job's principal: without authentication the jobs are
// the server's user's, which has every right in its store, so the key
// allows s3:* and nothing else (no Batch API, no dashboard). The key is
// taken only while the attempt runs: the executor revokes it when the
// attempt ends.
//
// Keys are derived from a secret kept in a file of the server's (0600,
// made at the first Grant), so that an executor that recovers a running
// attempt after a restart grants it the same key that its wrapper holds.
// It is safe for concurrent use.
type JobKeys struct {
	file, region, account string

	once    sync.Once
	secret  []byte
	loadErr error

	mu     sync.Mutex
	byJob  map[string]string // attempt ID → key id
	keys   atomic.Pointer[Keyring]
	policy *Policy
}

// JobKeyPrefix starts the id of every job key, so that the Guard knows
// one without a lookup (AWS's temporary keys start ASIA, its long-term ones
// AKIA).
const JobKeyPrefix = "QSJB"

// NewJobKeys returns job keys derived from the secret in file (created at
// the first Grant if missing), for requests signed for region, and
// principals of account.
func NewJobKeys(file, region, account string) *JobKeys {
	j := &JobKeys{file: file, region: region, account: account, byJob: map[string]string{},
		policy: &Policy{Name: "qshare-job", Statement: []Statement{{Effect: Allow, Action: []string{"s3:*"}, Resource: []string{"*"}}}}}
	j.keys.Store(&Keyring{account: account, keys: map[string]*keyEntry{}, names: map[string]*Principal{}})
	return j
}

// load reads the secret, or makes it.
func (j *JobKeys) load() error {
	j.once.Do(func() {
		b, err := os.ReadFile(j.file)
		if errors.Is(err, os.ErrNotExist) {
			s := make([]byte, 32)
			if _, err = rand.Read(s); err != nil {
				j.loadErr = fmt.Errorf("auth: no random numbers: %w", err)
				return
			}
			var f *os.File
			f, err = os.OpenFile(j.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				_, err = f.WriteString(hex.EncodeToString(s) + "\n")
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err == nil {
				j.secret = s
				return
			}
			if errors.Is(err, os.ErrExist) {
				b, err = os.ReadFile(j.file)
			}
		}
		if err == nil {
			j.secret, err = hex.DecodeString(strings.TrimSpace(string(b)))
			if err == nil && len(j.secret) < 16 {
				err = errors.New("it holds too short a secret")
			}
		}
		if err != nil {
			j.loadErr = fmt.Errorf("the job keys' secret %s: %w", j.file, err)
		}
	})
	return j.loadErr
}

// derive returns the key of attempt id.
func (j *JobKeys) derive(id string) AccessKey {
	mac := func(what string) []byte {
		h := hmac.New(sha256.New, j.secret)
		h.Write([]byte(what + "\x00" + id))
		return h.Sum(nil)
	}
	return AccessKey{ID: JobKeyPrefix + base32.StdEncoding.EncodeToString(mac("id")[:10]),
		Secret: base64.StdEncoding.EncodeToString(mac("secret")[:30])}
}

// Grant returns the access key of the attempt attemptID, and has the
// Guard take it until Revoke. Granting an attempt again gives the same
// key, also after a restart.
func (j *JobKeys) Grant(attemptID string) (keyID, secret string, err error) {
	if err := j.load(); err != nil {
		return "", "", err
	}
	k := j.derive(attemptID)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.byJob[attemptID] == k.ID {
		return k.ID, k.Secret, nil
	}
	j.byJob[attemptID] = k.ID
	j.swap(func(m map[string]*keyEntry) {
		p := &Principal{Name: "job-" + attemptID, ARN: "arn:aws:sts::" + j.account + ":assumed-role/qshare-job/" + attemptID, Policies: []*Policy{j.policy}}
		m[k.ID] = &keyEntry{owner: p, secret: k.Secret, signer: v4.NewSigner()}
	})
	return k.ID, k.Secret, nil
}

// Revoke makes the key of attemptID be refused from now on.
func (j *JobKeys) Revoke(attemptID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id, ok := j.byJob[attemptID]
	if !ok {
		return
	}
	delete(j.byJob, attemptID)
	j.swap(func(m map[string]*keyEntry) { delete(m, id) })
}

// swap puts in force a copy of the keyring that change has changed.
// j.mu is held.
func (j *JobKeys) swap(change func(map[string]*keyEntry)) {
	old := j.keys.Load()
	m := make(map[string]*keyEntry, len(old.keys)+1)
	for id, e := range old.keys {
		m[id] = e
	}
	change(m)
	j.keys.Store(&Keyring{account: j.account, keys: m, names: map[string]*Principal{}})
}

// Keys returns the keyring of the keys in force.
func (j *JobKeys) Keys() *Keyring { return j.keys.Load() }

// signedWith reports whether r's Authorization names a job key's id.
func signedWith(r *http.Request) bool {
	_, rest, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	return ok && strings.HasPrefix(rest, JobKeyPrefix)
}
