package shareview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"qshare"
)

// LendingSource answers who lends to whom: in the named job queue (a name or
// an ARN), or, for "", in every job queue with a quota-share policy.
// *LendingClient implements it.
type LendingSource interface {
	Lending(ctx context.Context, queue string) ([]qshare.Lending, error)
}

var _ LendingSource = (*LendingClient)(nil)

// LendingClient reads a qshare server's lending endpoint
// (qshare.LendingPath).
type LendingClient struct {
	// Endpoint is the server's base URL, such as http://127.0.0.1:8750.
	Endpoint string
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// Lending implements LendingSource. A refusal by the server is a
// *qshare.Error with the server's message; a server without the endpoint
// (an older qshare, or not qshare at all) is told apart.
func (c *LendingClient) Lending(ctx context.Context, queue string) ([]qshare.Lending, error) {
	u := c.Endpoint + qshare.LendingPath
	if queue != "" {
		u += "?" + url.Values{"jobQueue": {queue}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", qshare.LendingPath, err)
	}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var out struct {
			JobQueues []qshare.Lending `json:"jobQueues"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, fmt.Errorf("the server's answer to GET %s is not valid: %w", qshare.LendingPath, err)
		}
		return out.JobQueues, nil
	case resp.StatusCode == http.StatusForbidden && json.Unmarshal(body, &e) == nil && e.Type != "" && e.Message != "":
		return nil, qshare.Errorf(qshare.EDENIED, "%s: %s", e.Type, e.Message)
	case json.Unmarshal(body, &e) == nil && e.Type == "ClientException" && e.Message != "":
		return nil, qshare.Errorf(qshare.EINVALID, "%s", e.Message)
	case json.Unmarshal(body, &e) == nil && e.Message != "" && resp.StatusCode != http.StatusNotFound:
		return nil, fmt.Errorf("the server failed: %s", e.Message)
	}
	return nil, qshare.Errorf(qshare.EINVALID, "the server at %s does not serve GET %s (status %d): it may be an older qshare; `qshare shares` needs a server of this version", c.Endpoint, qshare.LendingPath, resp.StatusCode)
}
