package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The preorder scenario: holds past what is on hand, promised against a
// supplier's delivery within the backorder policy's horizon.
const (
	// preorderSKUs are the SKUs it holds from: none on hand, a notice of
	// preorderIncoming of each due in two days, and a policy that promises
	// what is due within a week.
	preorderSKUs     = 1_000
	preorderIncoming = 1_000_000
)

func preorderSKU(i int) string { return fmt.Sprintf("pre-%05d", i) }

// preorder: every client holds one unit of one of preorderSKUs at random;
// none is on hand, so each hold's unit is promised against what the
// supplier will deliver (backordered, expected_on the notice's day). It
// runs in turns with spread's holds (inTurnsWithSpread), whose rate it is
// compared with: the cost of reading each row's deliveries within the
// horizon under its lock and of moving the promise counter, inside the
// same group-committed batch.
func (b *bench) preorder(ctx context.Context) ([]*result, error) {
	if err := b.preorderStock(ctx); err != nil {
		return nil, err
	}
	leg := spreadLeg{scenario: "preorder", bodies: make([][]byte, preorderSKUs)}
	for i := range leg.bodies {
		leg.bodies[i] = holdBody(0, "", preorderSKU(i))
	}
	out, err := b.inTurnsWithSpread(ctx, []spreadLeg{leg})
	if err != nil {
		return nil, err
	}
	out[1].Note = fmt.Sprintf("%d SKUs with none on hand, each hold's unit promised against a delivery due in 2 days: %s", preorderSKUs, out[1].Note)
	return out, nil
}

// preorderStock records the scenario's notices (100 SKUs a notice) and
// sets each SKU's policy once, over HTTP, as an operator would. A SKU with
// a policy already (a reused database) is taken as it is.
func (b *bench) preorderStock(ctx context.Context) error {
	if a, err := b.do("GET", "/v1/skus/"+preorderSKU(preorderSKUs-1)+"/backorders", b.shop, "", nil); err == nil && a.status == http.StatusOK {
		return nil
	}
	due := time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)
	for n := 0; n < preorderSKUs; n += 100 {
		body := fmt.Sprintf(`{"supplier_ref":"PO-bench-%d","expected_on":%q,"lines":[`, n, due)
		for i := n; i < n+100; i++ {
			if i > n {
				body += ","
			}
			body += fmt.Sprintf(`{"sku":%q,"quantity":%d}`, preorderSKU(i), preorderIncoming)
		}
		key := fmt.Sprintf("po-bench-%d-%s", n, b.run)
		if _, err := b.call("POST", "/v1/inbound", b.ops, key, []byte(body+"]}"), http.StatusCreated); err != nil {
			return fmt.Errorf("inbound notice %d: %w", n, err)
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range min(b.o.clients, 16) {
		wg.Go(func() {
			for i := range next {
				if _, err := b.call("PUT", "/v1/skus/"+preorderSKU(i)+"/backorders", b.ops, "", []byte(`{"horizon_days":7}`), http.StatusOK); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, fmt.Errorf("policy of %s: %w", preorderSKU(i), err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range preorderSKUs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return cmpErr(firstErr, ctx.Err())
}
