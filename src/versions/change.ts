/**
 * A version change (after Stripe's "version change modules" and Cadwyn): one breaking difference
 * between an API version and the one before it, declared once, with what it does to a request on
 * its way up to the newest version and to a response (errors included) and an event payload on
 * their way down to an older one. Handlers, rules and storage are written against the newest
 * version only; an older version is answered through the changes made since.
 */

/** Header names lower-case, as Node gives them. */
export type Headers = Record<string, string | string[] | undefined>;

/** A request as an older version's client sent it, migrated in place towards the newest version. */
export interface VersionedRequest {
  /** The operation of the older version requested. */
  operationId: string;
  headers: Headers;
  /** The path parameters, by name. */
  params: Record<string, unknown>;
  query: Record<string, unknown>;
  body: unknown;
}

/** A response (a success or an error) of the newer version, migrated in place towards an older one. */
export interface VersionedResponse {
  /** The operation of the older version answered (`''` for a path it does not serve). */
  operationId: string;
  /** The request's path parameters (none for a refusal, written before they are read). */
  params: Record<string, unknown>;
  /**
   * The request's target as sent (`/v1/pets?status=sold`), and its query as validated against the
   * older version's contract (defaults applied) and migrated up: for the URLs an answer names, such
   * as a next page's. Absent for a refusal, answered alike to every request.
   */
  url?: string;
  query?: Record<string, unknown>;
  status: number;
  headers: Headers;
  body: unknown;
}

/** An event as the outbox keeps it: its kind and its payload `{type, timestamp, data}`. */
export interface VersionedEvent {
  type: string;
  payload: { type: string; timestamp: string; data: unknown };
}

/**
 * A difference the breaking-change check reports between the two versions' contracts (`redocly
 * diff`, older against newer) that this change accounts for: the place, as the check names it
 * (`GET /pets/{petId}`, `POST /pets responses/201`, `#/components/schemas/Pet`), which covers
 * every difference at or below it, and optionally the rule (`path-removed`).
 */
export interface Covered {
  at: string;
  rule?: string;
}

export interface VersionChange {
  /** What changed and why, in a sentence: the changelog's words for it. */
  description: string;
  /** The differences between the versions' contracts it accounts for (contract:check holds it to them). */
  covers: readonly Covered[];
  /**
   * An operation of the older version that the newer one no longer has, and the newer operation
   * that answers it (`{ getPet: 'listPets' }`); `requestUp` and `responseDown` make the one's
   * request and answer the other's.
   */
  answeredBy?: Readonly<Record<string, string>>;
  /** The older version's request made a request of the newer (a default for a new required header, say). */
  requestUp?: (request: VersionedRequest) => void;
  /** The newer version's response made the older version's. */
  responseDown?: (response: VersionedResponse) => void;
  /** The newer version's event payload made the older version's (a new copy: the newer one is signed too). */
  eventDown?: (event: VersionedEvent) => VersionedEvent;
}

/** A major version of the API and the changes that lead to it from the one before. */
export interface ApiVersion {
  /** The major version, `1`: served under `/v1`. */
  major: number;
  /** Empty for the first version. */
  changes: readonly VersionChange[];
}
