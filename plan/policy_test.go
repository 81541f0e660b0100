package plan

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestPolicyText pins the text of a policy in change lines. The wanted
// strings are what apply printed before the planner left package main,
// where the text was the -o json rendering of the SDK values (cmd/qshare's
// wire): float32 weights widened to float64, nil members left out.
func TestPolicyText(t *testing.T) {
	for _, c := range []struct {
		qsp  *types.QuotaSharePolicy
		fsp  *types.FairsharePolicy
		want string
	}{
		{&types.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}, nil, `{"quotaSharePolicy":{"idleResourceAssignmentStrategy":"FIFO"}}`},
		{nil, &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(3600), ComputeReservation: aws.Int32(0), ShareDistribution: []types.ShareAttributes{
			{ShareIdentifier: aws.String("a*"), WeightFactor: aws.Float32(0.1)}, {ShareIdentifier: aws.String("b"), WeightFactor: aws.Float32(2)}, {ShareIdentifier: aws.String("c")}}},
			`{"fairsharePolicy":{"computeReservation":0,"shareDecaySeconds":3600,"shareDistribution":[{"shareIdentifier":"a*","weightFactor":0.10000000149011612},{"shareIdentifier":"b","weightFactor":2},{"shareIdentifier":"c"}]}}`},
		{nil, &types.FairsharePolicy{}, `{"fairsharePolicy":{}}`},
		{&types.QuotaSharePolicy{}, nil, `{"quotaSharePolicy":{}}`},
		{nil, nil, `{}`},
	} {
		if got := policyText(c.qsp, c.fsp); got != c.want {
			t.Errorf("policyText\n got %s\nwant %s", got, c.want)
		}
	}
}
