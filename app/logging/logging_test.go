package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/logging"
)

func TestContextAttrsReachEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New("json", "debug", &buf)
	require.NoError(t, err)

	ctx := logging.With(context.Background(), slog.String("request_id", "r1"))
	inner := logging.With(ctx, slog.String("job_kind", "reconcile"))
	// Added later, through a derived context: seen by lines logged with
	// the outer context too, as the request line is.
	logging.Add(inner, slog.String("hold_id", "h1"))
	logging.Add(ctx, slog.String("sku", "A1"))
	logging.Add(ctx, slog.String("sku", "A2")) // replaces, no duplicate key
	log.InfoContext(ctx, "outer")
	log.InfoContext(inner, "inner")
	log.Info("no context")

	var lines []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 3)
	require.Equal(t, "r1", lines[0]["request_id"])
	require.Equal(t, "A2", lines[0]["sku"])
	require.Nil(t, lines[0]["hold_id"], "the inner bag is the job's own")
	require.Equal(t, "r1", lines[1]["request_id"])
	require.Equal(t, "reconcile", lines[1]["job_kind"])
	require.Equal(t, "h1", lines[1]["hold_id"])
	require.Nil(t, lines[2]["request_id"])
}

func TestFormats(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New("text", "info", &buf)
	require.NoError(t, err)
	log.InfoContext(logging.With(context.Background(), slog.String("request_id", "r1")), "hello")
	require.Contains(t, buf.String(), "msg=hello request_id=r1")
	log.Debug("hidden")
	require.NotContains(t, buf.String(), "hidden")

	_, err = logging.New("xml", "info", &buf)
	require.Error(t, err)
	_, err = logging.New("json", "loud", &buf)
	require.Error(t, err)
}
