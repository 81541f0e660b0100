package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

func TestRetryTransient(t *testing.T) {
	ctx := context.Background()
	conn := errors.New("read tcp: use of closed network connection")
	calls := 0
	retries, err := retryTransient(ctx, 3, func() error {
		calls++
		if calls < 3 {
			return conn
		}
		return nil
	})
	if err != nil || retries != 2 || calls != 3 {
		t.Errorf("connection errors: retries %d, calls %d, err %v; want 2, 3, nil", retries, calls, err)
	}

	calls = 0
	_, err = retryTransient(ctx, 3, func() error { calls++; return conn })
	if !errors.Is(err, conn) || calls != 3 {
		t.Errorf("persistent connection error: calls %d, err %v; want 3 calls and the error", calls, err)
	}

	calls = 0
	api := &types.ClientException{Message: new(string)}
	_, err = retryTransient(ctx, 3, func() error { calls++; return api })
	if calls != 1 || !errors.As(err, new(*types.ClientException)) {
		t.Errorf("an answer from the server was retried: %d calls, err %v", calls, err)
	}
}
