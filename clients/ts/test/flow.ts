// The client against a real server (clients/ts/client_test.go starts one and
// sets BASE, SHOP and OPS; by hand, the export line `make run` prints sets
// them): stock in, a hold, its confirm, another hold and its release, and a
// 409 read as a typed problem. Each step prints a line the Go test checks;
// any surprise exits 1. RUN, optional, makes the Idempotency-Keys this
// run's own (by default, the time it starts).
import { createStockhold, isProblem, type ProblemCode } from "../src/index.js";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

function fail(step: string, what: unknown): never {
  console.error(`${step}: ${JSON.stringify(what)}`);
  process.exit(1);
}

const baseUrl = env("BASE");
const ops = createStockhold({ baseUrl, token: env("OPS") });
const shop = createStockhold({ baseUrl, token: env("SHOP") });
const run = process.env.RUN || Date.now().toString(36); // makes the Idempotency-Keys this run's own

// Stock in (ops).
const stocked = await ops.POST("/v1/skus/{sku}/adjustments", {
  params: { path: { sku: "TS-1" }, header: { "Idempotency-Key": `in-${run}` } },
  body: { delta: 3, reason: "restock", ref: "PO-TS" },
});
if (!stocked.data) fail("stock in", stocked.error);
const main = stocked.data.pools.find((p) => p.pool === "main");
console.log(`stock ${stocked.data.sku} main available ${main?.available}`);

// A hold of 2, confirmed.
const held = await shop.POST("/v1/reservations", {
  params: { header: { "Idempotency-Key": `o-1-${run}` } },
  body: { order_ref: "o-1", items: [{ sku: "TS-1", quantity: 2 }], ttl_seconds: 600 },
});
if (!held.data) fail("hold", held.error);
console.log(`hold ${held.data.status} ${held.data.items.map((i) => `${i.sku}x${i.quantity}`).join(",")}`);
const confirmed = await shop.POST("/v1/reservations/{id}/confirm", { params: { path: { id: held.data.id } } });
if (!confirmed.data) fail("confirm", confirmed.error);
console.log(`confirm ${confirmed.data.status}`);

// Another hold of the last one, released.
const second = await shop.POST("/v1/reservations", {
  params: { header: { "Idempotency-Key": `o-2-${run}` } },
  body: { order_ref: "o-2", items: [{ sku: "TS-1", quantity: 1 }] },
});
if (!second.data) fail("second hold", second.error);
const released = await shop.POST("/v1/reservations/{id}/release", {
  params: { path: { id: second.data.id } },
  body: { reason: "cancelled" },
});
if (!released.data) fail("release", released.error);
console.log(`release ${released.data.status} ${released.data.release_reason}`);

// More than is left: a 409, read as a typed problem.
const refused = await shop.POST("/v1/reservations", {
  params: { header: { "Idempotency-Key": `o-3-${run}` } },
  body: { order_ref: "o-3", items: [{ sku: "TS-1", quantity: 5 }] },
});
if (refused.data || !isProblem(refused.error)) fail("refusal", refused);
const code: ProblemCode = refused.error.code;
console.log(`refused ${refused.response.status} ${code} ${refused.error.sku} ${refused.error.type}`);

// The stock as a catalogue sync reads it.
const page = await shop.GET("/v1/skus", { params: { query: { sku: ["TS-1", "TS-NONE"] } } });
if (!page.data) fail("catalogue", page.error);
console.log(`catalogue ${page.data.skus.map((s) => s.sku).join(",")} missing ${page.data.missing?.join(",")}`);
