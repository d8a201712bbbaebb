// A typed client of stockhold's HTTP API. The types are generated from
// app/api/openapi.json by openapi-typescript (src/schema.d.ts, `npm run
// generate`); the calls are openapi-fetch's, a thin wrapper of fetch that
// checks every path, parameter and body against those types and answers
// { data, error, response }: data typed by the operation's 2xx schema,
// error by its 4xx/5xx ones (RFC 9457 problems).
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

/** The schemas of the document, by name. */
export type Schemas = components["schemas"];
/** An RFC 9457 problem: every error stockhold answers. */
export type Problem = Schemas["Problem"];
/** A problem's code, the contract a client branches on. */
export type ProblemCode = Problem["code"];
export type Reservation = Schemas["Reservation"];
export type Stock = Schemas["Stock"];

/** A client of every route of the document. */
export type Stockhold = Client<paths>;

export interface StockholdOptions extends ClientOptions {
  /** Where stockhold answers, such as http://localhost:8080. */
  baseUrl: string;
  /** An API key: shop (holds and stock reads) or ops (everything). */
  token: string;
}

/** createStockhold returns a client that sends token as its bearer key. */
export function createStockhold({ token, headers, ...options }: StockholdOptions): Stockhold {
  return createClient<paths>({ ...options, headers: { ...headers, Authorization: `Bearer ${token}` } });
}

/** isProblem tells a problem+json answer from anything else. */
export function isProblem(value: unknown): value is Problem {
  return typeof value === "object" && value !== null && typeof (value as Problem).code === "string" &&
    typeof (value as Problem).status === "number";
}
