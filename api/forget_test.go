package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor"
)

// TestEndedAttemptsAreForgotten checks that the daemon tells the executor
// to drop every attempt whose end it has committed (so a long-running
// server's executor does not grow without bound), and never one that is
// still running.
func TestEndedAttemptsAreForgotten(t *testing.T) {
	s := newServer(t)
	s.reserved(4)
	ok := s.submit("q", "A", "ok", 1, payload(g5, 1, 10*time.Millisecond, 0))
	failed := s.submit("q", "A", "failed", 1, payload(g5, 1, 10*time.Millisecond, 3))
	long := s.submit("q", "A", "long", 1, payload(g5, 1, time.Hour, 0))
	s.waitStatus(ok, types.ServiceJobStatusSucceeded)
	s.waitStatus(failed, types.ServiceJobStatusFailed)
	s.waitStatus(long, types.ServiceJobStatusRunning)

	waitErr := func(attempt string) error {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := s.ex.Wait(c, attempt)
		return err
	}
	for _, attempt := range []string{ok + "-1", failed + "-1"} {
		deadline := time.Now().Add(5 * time.Second) // Forget runs right after the commit
		for err := waitErr(attempt); !errors.Is(err, executor.ErrUnknownAttempt); err = waitErr(attempt) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %s ended and was recorded, but the executor still knows it (Wait = %v)", attempt, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := waitErr(long + "-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait of the running attempt = %v, want it still running (deadline exceeded)", err)
	}
}
