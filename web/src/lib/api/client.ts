//! The one way the app talks to the API: a typed openapi-fetch client (paths and bodies from
//! generated/schema.d.ts, generated from the OpenAPI document) plus `api()`, which adds the access token,
//! refreshes it once on 401 and turns the uniform error body into a thrown `ApiError`.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./generated/schema";
import { session } from "../session.svelte";
import { describeError } from "../i18n/index.svelte";

export type Schemas = components["schemas"];
export type ObjectView = Schemas["ObjectView"];

/**
 * An API failure: the server's stable `code`, the field it is about, and as `message` what to
 * tell the person: the code's translation in the app's language, else the server's own text
 * (kept as `serverMessage`).
 */
export class ApiError extends Error {
  readonly serverMessage: string;
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string | null,
    readonly requestId?: string,
  ) {
    super(describeError(code, field, message));
    this.serverMessage = message;
    this.name = "ApiError";
  }
}

export const client = createClient<paths>({ baseUrl: "" });

// Requests that carry their own Authorization (refresh, sign-out with the refresh token) keep it.
const bearer: Middleware = {
  onRequest({ request }) {
    const token = session.accessToken;
    if (token && !request.headers.has("Authorization")) {
      request.headers.set("Authorization", `Bearer ${token}`);
    }
    return request;
  },
};
client.use(bearer);

type Outcome = { data?: unknown; error?: unknown; response: Response };

/** Turns any failed answer into an ApiError; bodies that are not ours get a generic code. */
export function toApiError(response: Response, body: unknown): ApiError {
  const b = (body ?? {}) as Partial<Schemas["ErrorBody"]>;
  if (typeof b.code === "string" && typeof b.message === "string") {
    return new ApiError(response.status, b.code, b.message, b.field, b.request_id);
  }
  return new ApiError(response.status, "http.unexpected", `${response.status} ${response.statusText}`);
}

/**
 * Runs one API call. Refreshes the access token ahead of expiry, and once more when the
 * server answers 401 (then repeats the call). Resolves to the answer's data; throws ApiError.
 */
export async function api<R extends Outcome>(run: () => Promise<R>): Promise<NonNullable<R["data"]>> {
  await session.ensureFresh();
  let out: Outcome;
  try {
    out = await run();
  } catch (e) {
    throw new ApiError(0, "http.network", String((e as Error)?.message ?? e));
  }
  if (out.response.status === 401 && session.refreshToken && (await session.refresh())) {
    out = await run();
  }
  if (out.response.status === 401) session.expired();
  if (out.error !== undefined || !out.response.ok) throw toApiError(out.response, out.error);
  return out.data as NonNullable<R["data"]>;
}
