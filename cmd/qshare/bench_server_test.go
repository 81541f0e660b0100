package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/batchclient"
	"qshare/internal/bench"
)

// TestInProcessServer: with --in-process, withServerFor starts a server in
// this process, hands f the endpoint of the port the kernel gave it (a
// server that answers the AWS API there), and stops it when f returns.
func TestInProcessServer(t *testing.T) {
	old := inProcess
	inProcess = true
	defer func() { inProcess = old }()
	ctx := context.Background()
	var got string
	_, err := withServerFor(ctx, "", bench.ServerOptions{Executor: "simulated", LogLevel: "warn"}, 0, func(ep string) (any, error) {
		got = ep
		c := batchclient.New(ep, "us-east-1")
		_, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "http://127.0.0.1:") || strings.HasSuffix(got, ":0") {
		t.Fatalf("endpoint %q, want http://127.0.0.1:PORT with the port the server got", got)
	}
	// Stopped: nothing answers there any more.
	if _, err := batchclient.New(got, "us-east-1").DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{}); err == nil {
		t.Fatalf("the in-process server still answers at %s after withServerFor returned", got)
	}
}
