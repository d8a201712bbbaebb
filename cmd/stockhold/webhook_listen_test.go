package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/webhooks"
)

// TestVerifySignature checks webhook-listen's verification, the reference
// for receivers, against the signer stockhold delivers with: a good
// signature passes; a wrong secret, a changed body, an old or future t and
// a missing header are refused.
func TestVerifySignature(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_796_000_000, 0)
	body := []byte(`{"events":[{"id":"1-1-0","type":"hold.confirmed"}]}`)
	header := webhooks.Sign("whsec_k", now, body)

	got, err := verify("whsec_k", header, body, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, now.Unix(), got)

	_, err = verify("whsec_other", header, body, now)
	require.ErrorContains(t, err, "does not match")
	_, err = verify("whsec_k", header, append([]byte(" "), body...), now)
	require.ErrorContains(t, err, "does not match")
	_, err = verify("whsec_k", header, body, now.Add(6*time.Minute))
	require.ErrorContains(t, err, "too old")
	_, err = verify("whsec_k", header, body, now.Add(-6*time.Minute))
	require.ErrorContains(t, err, "too new")
	_, err = verify("whsec_k", "", body, now)
	require.ErrorContains(t, err, "no Stockhold-Signature")

	// The documented recipe, by hand: hex HMAC-SHA256 of "t.body".
	mac := hmac.New(sha256.New, []byte("whsec_k"))
	mac.Write([]byte(strconv.FormatInt(now.Unix(), 10) + "." + string(body)))
	_, err = verify("whsec_k", "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+hex.EncodeToString(mac.Sum(nil)), body, now)
	require.NoError(t, err)
}
