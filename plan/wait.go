package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// errGone is what a wait's probe returns for a resource that no longer exists.
var errGone = errors.New("gone")

// waitFor polls probe until it reports a settled resource (or, with gone,
// no resource), for at most Options.Wait.
func (a *Applier) waitFor(ctx context.Context, what string, gone bool, probe func(context.Context) (status string, err error)) error {
	deadline := time.Now().Add(a.opts.Wait)
	delay := 50 * time.Millisecond
	for {
		status, err := probe(ctx)
		switch {
		case errors.Is(err, errGone):
			if gone {
				return nil
			}
		case err != nil:
			return err
		case status == "INVALID":
			return fmt.Errorf("%s became INVALID", what)
		case !gone && status == "VALID":
			return nil
		case gone && status == "DELETED":
			return nil
		}
		if time.Now().After(deadline) {
			want := "VALID"
			if gone {
				want = "deleted"
			}
			return fmt.Errorf("%s is %s after %s, not %s: raise --wait, or look at the server's log", what, orNone(status), a.opts.Wait, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func (a *Applier) waitEnv(ctx context.Context, name string, gone bool) error {
	return a.waitFor(ctx, "service environment "+name, gone, func(ctx context.Context) (string, error) {
		out, err := a.api.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{name}})
		if err != nil {
			return "", err
		}
		for _, e := range out.ServiceEnvironments {
			return string(e.Status), nil
		}
		return "", errGone
	})
}

func (a *Applier) waitQueue(ctx context.Context, name string, gone bool) error {
	return a.waitFor(ctx, "job queue "+name, gone, func(ctx context.Context) (string, error) {
		out, err := a.api.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{name}})
		if err != nil {
			return "", err
		}
		for _, q := range out.JobQueues {
			return string(q.Status), nil
		}
		return "", errGone
	})
}

func (a *Applier) waitShare(ctx context.Context, queue, name string, gone bool) error {
	return a.waitFor(ctx, "quota share "+queue+"/"+name, gone, func(ctx context.Context) (string, error) {
		p := batch.NewListQuotaSharesPaginator(a.api, &batch.ListQuotaSharesInput{JobQueue: aws.String(queue)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				var ce *types.ClientException
				if gone && errors.As(err, &ce) {
					return "", errGone // the queue itself is gone
				}
				return "", err
			}
			for _, s := range out.QuotaShares {
				if aws.ToString(s.QuotaShareName) == name {
					return string(s.Status), nil
				}
			}
		}
		return "", errGone
	})
}
