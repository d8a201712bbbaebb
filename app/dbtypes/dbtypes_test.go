package dbtypes_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/dbtypes"
)

// TestUUIDCodec sends ids every way the queries do (alone, in arrays, as
// nullable pointers, in binary and in text) through a connection with the
// registered codec, and reads back what PostgreSQL got.
func TestUUIDCodec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	require.NoError(t, dbtypes.Register(ctx, conn))

	a, b := uuid.New(), uuid.New()
	require.IsType(t, dbtypes.EncodeUUID{}, conn.TypeMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, a),
		"ids are copied, not formatted and parsed")
	var (
		ids      []uuid.UUID
		one      uuid.UUID
		some     *uuid.UUID
		none     *uuid.UUID
		asText   string
		arrayTxt string
	)
	err = conn.QueryRow(ctx, "SELECT $1::uuid[], $2::uuid, $3::uuid, $4::uuid, $2::uuid::text, $1::uuid[]::text",
		[]uuid.UUID{a, b}, a, &b, (*uuid.UUID)(nil)).Scan(&ids, &one, &some, &none, &asText, &arrayTxt)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{a, b}, ids)
	require.Equal(t, a, one)
	require.NotNil(t, some)
	require.Equal(t, b, *some)
	require.Nil(t, none)
	require.Equal(t, a.String(), asText)
	require.Equal(t, "{"+a.String()+","+b.String()+"}", arrayTxt)

	// The simple protocol sends text.
	err = conn.QueryRow(ctx, "SELECT $1::uuid::text", pgx.QueryExecModeSimpleProtocol, a).Scan(&asText)
	require.NoError(t, err)
	require.Equal(t, a.String(), asText)
}

// TestTimestamptzInUTC reads times every way the queries do (alone, in
// arrays, nullable, in binary and in text) on a connection whose session
// is in another time zone: each comes back in UTC.
func TestTimestamptzInUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["timezone"] = "Asia/Tokyo"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	require.NoError(t, dbtypes.Register(ctx, conn))

	var (
		one   time.Time
		some  *time.Time
		none  *time.Time
		many  []time.Time
		typed pgtype.Timestamptz
		text  time.Time
	)
	const q = "SELECT now(), now(), NULL::timestamptz, ARRAY[now(), now() - interval '1 day'], now()"
	require.NoError(t, conn.QueryRow(ctx, q).Scan(&one, &some, &none, &many, &typed))
	require.NoError(t, conn.QueryRow(ctx, "SELECT now()", pgx.QueryExecModeSimpleProtocol).Scan(&text))
	require.Nil(t, none)
	require.Len(t, many, 2)
	for name, at := range map[string]time.Time{"one": one, "nullable": *some, "array[0]": many[0], "array[1]": many[1],
		"pgtype": typed.Time, "text": text} {
		require.Same(t, time.UTC, at.Location(), name)
		require.WithinDuration(t, time.Now(), at, time.Minute+24*time.Hour, name)
	}

	// Without Register, pgx answers in time.Local: what Register changes.
	plain, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close(context.Background()) })
	require.NoError(t, plain.QueryRow(ctx, "SELECT now()").Scan(&one))
	require.Same(t, time.Local, one.Location())
}
