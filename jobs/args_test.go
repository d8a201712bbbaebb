package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
	"github.com/stockhold/stockhold/jobs"
)

// decodeAs decodes raw strictly as the args of kind, the way the worker of
// that kind does.
func decodeAs(kind string, raw []byte) error {
	var err error
	switch kind {
	case "manual_rollback":
		_, err = jobs.DecodeArgs[rollbacks.ManualRollbackArgs](raw)
	case "rollback_batch":
		_, err = jobs.DecodeArgs[rollbacks.RollbackBatchArgs](raw)
	case "campaign_start":
		_, err = jobs.DecodeArgs[campaigns.CampaignStartArgs](raw)
	case "campaign_end":
		_, err = jobs.DecodeArgs[campaigns.CampaignEndArgs](raw)
	case "reconcile":
		_, err = jobs.DecodeArgs[reconcile.ReconcileArgs](raw)
	case "deliver_alert":
		_, err = jobs.DecodeArgs[alerts.DeliverAlertArgs](raw)
	case "sweep_expired":
		_, err = jobs.DecodeArgs[jobs.SweepExpiredArgs](raw)
	case "watch_discarded":
		_, err = jobs.DecodeArgs[jobs.WatchDiscardedArgs](raw)
	case "retention":
		_, err = jobs.DecodeArgs[jobs.RetentionArgs](raw)
	case "ledger_partitions":
		_, err = jobs.DecodeArgs[jobs.LedgerPartitionsArgs](raw)
	case "webhook_deliver":
		_, err = jobs.DecodeArgs[webhooks.DeliverArgs](raw)
	case "webhook_dispatch":
		_, err = jobs.DecodeArgs[webhooks.DispatchArgs](raw)
	default:
		panic("no such kind: " + kind)
	}
	return err
}

// TestArgsMarshalledByGoDecode checks that what stockhold itself enqueues
// (args marshalled from Go, with and without their optional fields) passes
// the strict decoding of its worker.
func TestArgsMarshalledByGoDecode(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-time.Hour).UTC()
	for _, args := range []river.JobArgs{
		rollbacks.ManualRollbackArgs{RollbackID: 7, Operator: "alice", Reason: "r", Scope: rollbacks.Scope{ReservationIDs: []uuid.UUID{uuid.New()}}},
		rollbacks.ManualRollbackArgs{Operator: "alice", Reason: "r", DryRun: true, Scope: rollbacks.Scope{SKU: "A1", Pool: "main", HeldBefore: &past}},
		rollbacks.ManualRollbackArgs{Operator: "alice", Reason: "r", Scope: rollbacks.Scope{Campaign: "bf"}},
		rollbacks.RollbackBatchArgs{RollbackID: 1},
		campaigns.CampaignStartArgs{Campaign: "bf"},
		campaigns.CampaignEndArgs{Campaign: "bf"},
		reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic},
		reconcile.ReconcileArgs{RunID: 3, Trigger: reconcile.TriggerHTTP, SKUs: []string{"A1"}},
		reconcile.ReconcileArgs{Trigger: reconcile.TriggerCampaignEnd, SKUs: []string{"A1", "B1"}},
		alerts.DeliverAlertArgs{AlertID: 1},
		jobs.SweepExpiredArgs{},
		jobs.WatchDiscardedArgs{},
		jobs.RetentionArgs{},
		jobs.LedgerPartitionsArgs{},
		webhooks.DeliverArgs{WebhookID: 3},
		webhooks.DispatchArgs{},
	} {
		raw, err := json.Marshal(args)
		require.NoError(t, err)
		require.NoError(t, decodeAs(args.Kind(), raw), "%s %s", args.Kind(), raw)
	}
}

// TestArgsRefused is the table of args a worker refuses, with what the
// refusal must name. Without the strict decoding, each manual_rollback
// row would run as a real rollback (or be retried three times).
func TestArgsRefused(t *testing.T) {
	t.Parallel()
	id := uuid.New().String()
	for _, c := range []struct{ kind, args, want string }{
		// A misspelt field silently fell back to its default.
		{"manual_rollback", `{"operator":"alice","reason":"count only","dryrun":true,"sku":"R1"}`, `unknown field "dryrun"`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","pol":"c1"}`, `unknown field "pol"`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","held_befor":"2020-01-01T00:00:00Z"}`, `unknown field "held_befor"`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","Dry_Run":true}`, `unknown field "Dry_Run"`},
		// A wrong type was an error on every attempt, then discarded.
		{"manual_rollback", `{"operator":"alice","reason":"r","dry_run":"true","sku":"R1"}`, `field "dry_run": cannot unmarshal string into Go value of type bool`},
		{"manual_rollback", `{"operator":"alice","reason":"r","reservation_ids":"` + id + `"}`, `field "reservation_ids": cannot unmarshal string`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","held_before":"yesterday"}`, `field "held_before": parsing time "yesterday"`},
		{"manual_rollback", `{"operator":"alice","reason":"r","dry_run":null,"sku":"R1"}`, `field "dry_run" is null`},
		// A scope can be neither empty nor ambiguous.
		{"manual_rollback", `{"operator":"alice","reason":"r","reservation_ids":[],"sku":"R1"}`, `field "reservation_ids" is given empty`},
		{"manual_rollback", `{"operator":"alice","reason":"r","campaign":"","sku":"R1"}`, `field "campaign" is given empty`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","pool":""}`, `field "pool" is given empty`},
		{"manual_rollback", `{"operator":"alice","reason":"r"}`, `exactly one scope`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","campaign":"c1"}`, `exactly one scope`},
		{"manual_rollback", `{"operator":"alice","reason":"r","campaign":"c1","held_before":"2020-01-01T00:00:00Z"}`, `held_before goes with sku or location`},
		{"manual_rollback", `{"reason":"r","sku":"R1"}`, `operator is required`},
		{"manual_rollback", `["alice"]`, `JSON object`},
		{"manual_rollback", `{"operator":"alice","reason":"r","sku":"R1","rollback_id":-1}`, `rollback_id must be positive`},
		// Every other kind too.
		{"rollback_batch", `{"rollback_id":"5"}`, `field "rollback_id": cannot unmarshal string`},
		{"rollback_batch", `{"rollback_id":5,"pause":1}`, `unknown field "pause"`},
		{"rollback_batch", `{"rollback_id":0}`, `rollback_id must be positive`},
		{"rollback_batch", `{}`, `rollback_id must be positive`},
		{"campaign_start", `{"campaign":5}`, `field "campaign": cannot unmarshal number`},
		{"campaign_start", `{"campaign_id":"bf"}`, `unknown field "campaign_id"`},
		{"campaign_end", `{"campaign":""}`, `campaign is empty`},
		{"reconcile", `{"trigger":"periodic","sku":["A1"]}`, `unknown field "sku"`},
		{"reconcile", `{"trigger":"whenever"}`, `trigger must be`},
		{"reconcile", `{"trigger":"cli","skus":["a/b"]}`, `contains a slash`},
		{"reconcile", `{"trigger":"cli","run_id":1.5}`, `field "run_id": cannot unmarshal number 1.5`},
		{"deliver_alert", `{"alert_id":"1"}`, `field "alert_id": cannot unmarshal string`},
		{"sweep_expired", `{"grace":"1h"}`, `unknown field "grace" (the fields are none: give {})`},
		{"watch_discarded", `null`, `JSON object`},
		{"retention", `{"older_than":"1h"}`, `unknown field "older_than" (the fields are none: give {})`},
		{"ledger_partitions", `{"ahead":3}`, `unknown field "ahead" (the fields are none: give {})`},
		{"webhook_deliver", `{"webhook_id":"3"}`, `field "webhook_id": cannot unmarshal string`},
		{"webhook_deliver", `{"webhook_id":0}`, `webhook_id must be`},
		{"webhook_deliver", `{"webhook":3}`, `unknown field "webhook"`},
		{"webhook_dispatch", `{"span":"5s"}`, `unknown field "span" (the fields are none: give {})`},
	} {
		err := decodeAs(c.kind, []byte(c.args))
		require.Error(t, err, "%s %s", c.kind, c.args)
		require.Contains(t, err.Error(), c.want, "%s %s", c.kind, c.args)
	}
}
