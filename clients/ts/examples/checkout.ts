// A checkout with the TypeScript client: stock in (an ops key), a hold of
// two for a cart (a shop key), the payment confirmed, and a hold of more
// than is left read as a typed problem. Run it against a server with
// BASE, OPS and SHOP set (the export line `make run` prints):
//   npm ci && npm run build && node dist/examples/checkout.js
import { createStockhold, isProblem } from "../src/index.js";

const baseUrl = process.env.BASE ?? "http://localhost:8080";
const ops = createStockhold({ baseUrl, token: process.env.OPS ?? "" });
const shop = createStockhold({ baseUrl, token: process.env.SHOP ?? "" });
// Each run's Idempotency-Keys are its own: the same key again replays.
const run = process.env.RUN || Date.now().toString(36);

const stocked = await ops.POST("/v1/skus/{sku}/adjustments", {
  params: { path: { sku: "TS-MUG" }, header: { "Idempotency-Key": `in-${run}` } },
  body: { delta: 3, reason: "restock" },
});
if (!stocked.data) throw new Error(`stock in: ${JSON.stringify(stocked.error)}`);

const { data, error, response } = await shop.POST("/v1/reservations", {
  params: { header: { "Idempotency-Key": `order-1-${run}` } },
  body: { order_ref: "order-1", items: [{ sku: "TS-MUG", quantity: 2 }], ttl_seconds: 900 },
});
if (!data) throw new Error(`hold: ${response.status} ${JSON.stringify(error)}`);
console.log("held", data.status, data.items.map((i) => `${i.sku}x${i.quantity}`).join(","));

const paid = await shop.POST("/v1/reservations/{id}/confirm", { params: { path: { id: data.id } } });
console.log("confirmed", paid.data?.status);

const more = await shop.POST("/v1/reservations", {
  params: { header: { "Idempotency-Key": `order-2-${run}` } },
  body: { order_ref: "order-2", items: [{ sku: "TS-MUG", quantity: 5 }] },
});
if (isProblem(more.error)) console.log("refused", more.response.status, more.error.code, more.error.sku);
