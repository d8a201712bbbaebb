package app

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
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
	require.NoError(t, registerTypes(ctx, conn))

	a, b := uuid.New(), uuid.New()
	require.IsType(t, encodeUUID{}, conn.TypeMap().PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, a),
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
