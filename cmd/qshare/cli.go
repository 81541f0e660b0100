package main

// The plumbing that every client command shares: the --endpoint, --region and
// -o flags, the AWS SDK batch client, turning API errors into one clear line,
// printing tables, JSON and YAML, and finding a job by id, ARN or name.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare"
	"qshare/config"
	"qshare/internal/batchclient"
)

// DefaultEndpoint is where the client commands find the server unless
// --endpoint or QSHARE_ENDPOINT says otherwise.
const DefaultEndpoint = "http://127.0.0.1:8750"

// clientOptions are the flags of every command that talks to a server.
type clientOptions struct {
	endpoint string
	region   string
	output   string
	profile  string
}

// client is the one set of client flags: a process runs one command.
var client clientOptions

// addClientFlags gives cmd the flags of a command that talks to a server.
// Their defaults are fixed (the generated reference shows them); the
// environment is read when the command runs.
func addClientFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&client.endpoint, "endpoint", DefaultEndpoint, "the qshare server's URL (env QSHARE_ENDPOINT)")
	f.StringVar(&client.region, "region", "us-east-1", "the AWS region the requests are signed for (env QSHARE_REGION, then AWS_REGION)")
	f.StringVarP(&client.output, "output", "o", "table", "output format: table, json or yaml")
	f.StringVar(&client.profile, "profile", "", "sign the requests with the credentials of this AWS `PROFILE` (~/.aws/credentials, ~/.aws/config); by default the standard AWS chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the default profile, else placeholder credentials that only a server without --auth accepts")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// resolveClientOptions applies the environment to flags the user did not set.
func resolveClientOptions(cmd *cobra.Command) (clientOptions, error) {
	o := client
	if !cmd.Flags().Changed("endpoint") {
		if v := os.Getenv("QSHARE_ENDPOINT"); v != "" {
			o.endpoint = v
		}
	}
	if !cmd.Flags().Changed("region") {
		if v := os.Getenv("QSHARE_REGION"); v != "" {
			o.region = v
		} else if v := os.Getenv("AWS_REGION"); v != "" {
			o.region = v
		}
	}
	switch o.output {
	case "table", "json", "yaml":
	default:
		return o, qshare.Errorf(qshare.EINVALID, "--output %q is not known: use table, json or yaml", o.output)
	}
	if !strings.HasPrefix(o.endpoint, "http://") && !strings.HasPrefix(o.endpoint, "https://") {
		return o, qshare.Errorf(qshare.EINVALID, "--endpoint %q is not a URL: write it as http://HOST:PORT", o.endpoint)
	}
	o.endpoint = strings.TrimRight(o.endpoint, "/")
	return o, nil
}

// newClient returns the AWS SDK batch client for an endpoint
// (batchclient.New), signing with placeholder credentials: for the demo's
// own server, which runs without authentication. The SDK retries once, and
// never waits long for a server that is not there.
func newClient(endpoint, region string) *batch.Client {
	return batchclient.New(endpoint, region, func(o *batch.Options) { o.RetryMaxAttempts = 2 })
}

// clientsFor returns the clients of a command that talks to the server of
// o: the AWS SDK batch client, and an HTTP client for the extension
// endpoints (logs, lending); both sign their requests with the credentials
// the standard AWS chain finds (batchclient.Load, --profile) and
// trust AWS_CA_BUNDLE.
func clientsFor(ctx context.Context, o clientOptions) (*batch.Client, *http.Client, error) {
	api, hc, _, err := clientsWithCreds(ctx, o)
	return api, hc, err
}

// clientsWithCreds is clientsFor that also says whether no credentials
// were found (and placeholder ones sign).
func clientsWithCreds(ctx context.Context, o clientOptions) (*batch.Client, *http.Client, bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	creds, hc, err := batchclient.Load(ctx, o.profile)
	if err != nil {
		return nil, nil, false, err
	}
	api := batchclient.NewSigned(o.endpoint, o.region, creds, hc, func(o *batch.Options) { o.RetryMaxAttempts = 2 })
	return api, batchclient.SignedHTTPClient(hc, creds, o.region), creds == batchclient.Placeholder, nil
}

// session is what a running client command works with.
type session struct {
	api         *batch.Client
	http        *http.Client // signed, for the extension endpoints
	placeholder bool         // no credentials were found: they sign with batchclient.Placeholder
	endpoint    string
	output      string
	out         io.Writer
	now         func() time.Time
}

// do sends req with the session's signed client, or with
// http.DefaultClient in a session that has none.
func (s *session) do(req *http.Request) (*http.Response, error) {
	if s.http == nil {
		return http.DefaultClient.Do(req)
	}
	return s.http.Do(req)
}

// newSession resolves the client flags of cmd and makes its client.
func newSession(cmd *cobra.Command) (*session, error) {
	o, err := resolveClientOptions(cmd)
	if err != nil {
		return nil, err
	}
	api, hc, placeholder, err := clientsWithCreds(cmd.Context(), o)
	if err != nil {
		return nil, err
	}
	return &session{api: api, http: hc, placeholder: placeholder, endpoint: o.endpoint, output: o.output, out: cmd.OutOrStdout(), now: time.Now}, nil
}

// clientRun wraps the body of a client command so that its error reaches
// the user as one clear line (see userError).
func clientRun(fn func(cmd *cobra.Command, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		// A client command's live heap is small and its run short: at the
		// default GOGC its first collection falls at 4 MB, inside most
		// commands (the AWS configuration's CA bundle alone allocates
		// about 1 MB). GOGC=400 puts it at 16 MB: a qshare jobs took some
		// 200 page faults and 4 ms of CPU fewer (perf stat -r 30). A GOGC
		// of the user's own stands.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(400)
		}
		s, err := newSession(cmd)
		if err != nil {
			return err
		}
		err = userError(fn(cmd, s, args), s.endpoint)
		if err != nil && s.placeholder && strings.Contains(err.Error(), "UnrecognizedClientException") {
			err = fmt.Errorf("%w\n(no AWS credentials were found, so the request was signed with placeholder ones: this server checks signatures; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to your key of its auth file, or give --profile)", err)
		}
		return err
	}
}

// userError turns an error from the SDK or the server into what the user
// should read: the ClientException's own message, a note that the server
// is not reachable, and so on. Other errors pass through.
func userError(err error, endpoint string) error {
	if err == nil {
		return nil
	}
	var ce *types.ClientException
	if errors.As(err, &ce) {
		return errors.New(ce.ErrorMessage())
	}
	var se *types.ServerException
	if errors.As(err, &se) {
		return fmt.Errorf("the server failed: %s", se.ErrorMessage())
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s: %s", ae.ErrorCode(), ae.ErrorMessage())
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return fmt.Errorf("cannot reach a qshare server at %s: start one with `qshare serve`, or point --endpoint (or QSHARE_ENDPOINT) at yours", endpoint)
	}
	var qe *qshare.Error
	if errors.As(err, &qe) {
		var ce *config.Errors
		if errors.As(err, &ce) {
			return ce
		}
		return errors.New(qe.Message)
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	return err
}

// emit prints v as JSON or YAML, or calls table to print it as a table.
func (s *session) emit(v any, table func(w io.Writer) error) error {
	switch s.output {
	case "json":
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(wire(v))
	case "yaml":
		b, err := yaml.Marshal(wire(v))
		if err != nil {
			return err
		}
		_, err = s.out.Write(b)
		return err
	}
	return table(s.out)
}

// wire converts a value for JSON or YAML output. Values of the AWS SDK's
// types become maps keyed by their wire names (the Go field name with a
// lower-case first letter, as the Batch API spells them), without the SDK's
// result metadata and nil members; values whose fields carry json tags are
// converted as encoding/json would, so that YAML shows the same keys.
func wire(v any) any {
	return wireValue(reflect.ValueOf(v))
}

func wireValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return wireValue(v.Elem())
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			return t.UTC().Format(time.RFC3339)
		}
		m := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Name == "ResultMetadata" {
				continue
			}
			name := lowerFirst(f.Name)
			omit := false
			if tag, ok := f.Tag.Lookup("json"); ok {
				parts := strings.Split(tag, ",")
				if parts[0] == "-" {
					continue
				}
				if parts[0] != "" {
					name = parts[0]
				}
				for _, p := range parts[1:] {
					omit = omit || p == "omitempty" || p == "omitzero"
				}
			}
			fv := v.Field(i)
			if (fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Interface || fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.IsNil() {
				continue
			}
			if omit && fv.IsZero() {
				continue
			}
			if fv.Kind() == reflect.String && fv.Len() == 0 && f.Tag.Get("json") == "" {
				continue // an unset SDK enum
			}
			m[name] = wireValue(fv)
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = wireValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[fmt.Sprint(k.Interface())] = wireValue(v.MapIndex(k))
		}
		return out
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f == float64(int64(f)) {
			return int64(f)
		}
		return f
	}
	return v.Interface()
}

func lowerFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToLower(r)) + s[i+len(string(r)):]
	}
	return s
}

// table returns a tab writer with qshare's table layout.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// msTime converts an API timestamp (epoch milliseconds) to a time.
func msTime(ms *int64) time.Time {
	if ms == nil || *ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(*ms)
}

// clock formats an API timestamp for a table, "-" when unset.
func clock(ms *int64) string {
	t := msTime(ms)
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// usage formats a job's capacity usage as 1×ml.g5.xlarge.
func usage[T interface {
	types.ServiceJobCapacityUsageSummary | types.ServiceJobCapacityUsageDetail | types.QueueSnapshotCapacityUsage | types.QuotaShareCapacityUsage
}](us []T) string {
	c := qshare.Capacity{}
	for _, u := range us {
		var unit *string
		var q *float64
		switch x := any(u).(type) {
		case types.ServiceJobCapacityUsageSummary:
			unit, q = x.CapacityUnit, x.Quantity
		case types.ServiceJobCapacityUsageDetail:
			unit, q = x.CapacityUnit, x.Quantity
		case types.QueueSnapshotCapacityUsage:
			unit, q = x.CapacityUnit, x.Quantity
		case types.QuotaShareCapacityUsage:
			unit, q = x.CapacityUnit, x.Quantity
		}
		c[aws.ToString(unit)] += int64(aws.ToFloat64(q))
	}
	if len(c.Types()) == 0 {
		return "-"
	}
	return c.String()
}

// nameOfARN returns the name part of a job queue ARN (or the argument when
// it is not an ARN).
func nameOfARN(arn string) string {
	if !strings.HasPrefix(arn, "arn:") {
		return arn
	}
	rest := arn[strings.LastIndexByte(arn, ':')+1:]
	parts := strings.Split(rest, "/")
	if len(parts) >= 2 && parts[0] == "job-queue" {
		return parts[1]
	}
	return parts[len(parts)-1]
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// jobRun is clientRun for a command whose argument is a JOB: fn gets the
// argument as given (ref) and the job's id, as resolveJob finds it (in the
// job queue *queue, when given).
func jobRun(queue *string, fn func(cmd *cobra.Command, s *session, ref, id string) error) func(*cobra.Command, []string) error {
	return clientRun(func(cmd *cobra.Command, s *session, args []string) error {
		id, err := s.resolveJob(cmd.Context(), args[0], *queue)
		if err != nil {
			return err
		}
		return fn(cmd, s, args[0], id)
	})
}

// resolveJob turns a job reference into a job id (or ARN) that the API
// takes. A job id or ARN is used as it is; anything else is looked up as a
// job name in every job queue (or in queue, when given), and must match
// exactly one job.
func (s *session) resolveJob(ctx context.Context, ref, queue string) (string, error) {
	if uuidRE.MatchString(ref) || strings.HasPrefix(ref, "arn:") {
		return ref, nil
	}
	if err := qshare.ValidateName("job name", ref); err != nil {
		return "", qshare.Errorf(qshare.EINVALID, "%q is neither a job id, a job ARN nor a job name", ref)
	}
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = s.queueNames(ctx); err != nil {
			return "", err
		}
	}
	var ids []string
	for _, q := range queues {
		jobs, err := allPages(ctx, batch.NewListServiceJobsPaginator(s.api, &batch.ListServiceJobsInput{
			JobQueue: aws.String(q),
			Filters:  []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{ref}}},
		}), func(out *batch.ListServiceJobsOutput) []types.ServiceJobSummary { return out.JobSummaryList })
		if err != nil {
			return "", err
		}
		for _, j := range jobs {
			if strings.EqualFold(aws.ToString(j.JobName), ref) {
				ids = append(ids, aws.ToString(j.JobId))
			}
		}
	}
	switch len(ids) {
	case 0:
		return "", qshare.Errorf(qshare.ENOTFOUND, "no job is named %s: list the jobs with `qshare jobs`", ref)
	case 1:
		return ids[0], nil
	}
	sort.Strings(ids)
	return "", qshare.Errorf(qshare.EINVALID, "%d jobs are named %s (%s): give the job id instead", len(ids), ref, strings.Join(ids, ", "))
}

// queueNames lists the names of every job queue, sorted.
func (s *session) queueNames(ctx context.Context) ([]string, error) {
	queues, err := allPages(ctx, batch.NewDescribeJobQueuesPaginator(s.api, &batch.DescribeJobQueuesInput{}),
		func(out *batch.DescribeJobQueuesOutput) []types.JobQueueDetail { return out.JobQueues })
	if err != nil {
		return nil, err
	}
	var names []string
	for _, q := range queues {
		if q.Status != types.JQStatusDeleted {
			names = append(names, aws.ToString(q.JobQueueName))
		}
	}
	sort.Strings(names)
	return names, nil
}

// allPages returns the items of every page p gives, as items picks them
// from each; it stops at the first error.
func allPages[O, T any](ctx context.Context, p interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*batch.Options)) (O, error)
}, items func(O) []T) ([]T, error) {
	var all []T
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, items(out)...)
	}
	return all, nil
}

// parallel calls fn for each index below n, at most limit at a time, and
// returns the first error.
func parallel(n, limit int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	sem := make(chan struct{}, limit)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if errs == nil {
					errs = err
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return errs
}

// complete offers the shell what list returns on a session of cmd, asked
// within 3 s; an error offers nothing.
func complete(cmd *cobra.Command, list func(ctx context.Context, s *session) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	s, err := newSession(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	out, err := list(ctx, s)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeJobs offers the names of the jobs of every queue to the shell.
func completeJobs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return complete(cmd, func(ctx context.Context, s *session) ([]string, error) {
		queues, err := s.queueNames(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, q := range queues {
			res, err := s.api.ListServiceJobs(ctx, &batch.ListServiceJobsInput{
				JobQueue: aws.String(q),
				Filters:  []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{toComplete + "*"}}},
			})
			if err != nil {
				continue
			}
			for _, j := range res.JobSummaryList {
				out = append(out, aws.ToString(j.JobName)+"\t"+string(j.Status))
			}
		}
		return out, nil
	})
}

// completeQueues offers the job queues' names to the shell.
func completeQueues(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return complete(cmd, func(ctx context.Context, s *session) ([]string, error) { return s.queueNames(ctx) })
}

// completeShares offers the quota shares' names (of --queue, or of every
// queue) to the shell.
func completeShares(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return complete(cmd, func(ctx context.Context, s *session) ([]string, error) {
		queues := []string{}
		if f := cmd.Flags().Lookup("queue"); f != nil && f.Value.String() != "" {
			queues = append(queues, f.Value.String())
		} else if qs, err := s.queueNames(ctx); err != nil {
			return nil, err
		} else {
			queues = qs
		}
		seen := map[string]bool{}
		var out []string
		for _, q := range queues {
			res, err := s.api.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String(q)})
			if err != nil {
				continue
			}
			for _, sh := range res.QuotaShares {
				if n := aws.ToString(sh.QuotaShareName); !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
		return out, nil
	})
}

// orNone is s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
