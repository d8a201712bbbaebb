package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/stockhold/stockhold/app/db"
)

// DeliverAlertArgs is the job that POSTs one new alert to the webhook.
type DeliverAlertArgs struct {
	AlertID int64 `json:"alert_id"`
}

// Kind names the job in river_job.
func (DeliverAlertArgs) Kind() string { return "deliver_alert" }

// Webhook is the body POSTed for each alert.
type Webhook struct {
	Service string `json:"service"`
	Alert   Alert  `json:"alert"`
}

// Deliver POSTs alert id as JSON to url. Anything but a 2xx answer is an
// error, so the job retries.
func (s *Service) Deliver(ctx context.Context, client *http.Client, url string, id int64) error {
	a, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	body, err := json.Marshal(Webhook{Service: "stockhold", Alert: a})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stockhold-alerts")
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post alert %d: %w", id, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("post alert %d: webhook answered %s", id, res.Status)
	}
	return db.New(s.pool).AlertDelivered(ctx, id)
}
