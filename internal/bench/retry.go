package bench

import (
	"context"
	"errors"
	"time"

	"github.com/aws/smithy-go"
)

// transient reports whether err is a failure of the connection rather than
// an answer from the server: an API error (ClientException,
// ServerException) is an answer, and is never retried.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var api smithy.APIError
	return !errors.As(err, &api)
}

// retryTransient calls f until it succeeds, fails with an answer from the
// server, or has failed attempts times on the connection, waiting a little
// longer each time. It returns how many calls were retried. Only calls that
// are safe to repeat go through it: reads, and submits with a clientToken.
func retryTransient(ctx context.Context, attempts int, f func() error) (retries int, err error) {
	for i := 0; ; i++ {
		err = f()
		if !transient(err) || i+1 >= attempts {
			return i, err
		}
		select {
		case <-ctx.Done():
			return i, ctx.Err()
		case <-time.After(time.Duration(10<<i) * time.Millisecond):
		}
	}
}
