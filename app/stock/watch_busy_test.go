package stock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// TestRetryWatchBusy: a transaction refused for a component row in use is
// run again, up to watchBusyTries times, and then refused busy (a 503 the
// client retries), never passed on as an error of the service; any other
// answer is passed on at once.
func TestRetryWatchBusy(t *testing.T) {
	t.Parallel()
	runs := 0
	_, err := retryWatchBusy(func() (int, error) {
		runs++
		return 0, fmt.Errorf("watch the components of bundle BOX: %w", errWatchBusy)
	})
	require.Equal(t, watchBusyTries, runs)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeBusy, de.Code)

	runs = 0
	got, err := retryWatchBusy(func() (int, error) {
		runs++
		if runs < 3 {
			return 0, errWatchBusy
		}
		return 7, nil
	})
	require.NoError(t, err)
	require.Equal(t, 7, got)
	require.Equal(t, 3, runs)

	other := errors.New("other")
	runs = 0
	_, err = retryWatchBusy(func() (int, error) { runs++; return 0, other })
	require.ErrorIs(t, err, other)
	require.Equal(t, 1, runs)
}
