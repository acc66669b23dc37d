/** Small pieces of HTTP the contract's conventions need and openapi-fetch does not do. */

/**
 * A query string serialised as the contract declares each parameter: `form` style, arrays exploded
 * (`id=1&id=2`) unless the parameter says `explode: false` (`id=1,2`).
 */
export function queryString(
  query: Record<string, unknown>,
  arrays: Readonly<Record<string, { readonly explode: boolean }>> = {},
): string {
  const pairs: string[] = [];
  const pair = (name: string, value: unknown) => `${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`;
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (!Array.isArray(value)) pairs.push(pair(name, value));
    else if (arrays[name]?.explode === false) {
      pairs.push(`${encodeURIComponent(name)}=${value.map((item) => encodeURIComponent(String(item))).join(',')}`);
    } else for (const item of value) pairs.push(pair(name, item));
  }
  return pairs.join('&');
}

/** The URL of a `Link` header's `rel="next"` link (RFC 8288), if it has one. */
export function nextLink(header: string | null): string | undefined {
  // A link is `<url>` and its `;` parameters; a URL may hold commas (`?id=1,2`), so links are not split on them.
  for (const [, url, parameters = ''] of (header ?? '').matchAll(/<([^>]*)>([^<]*)/g)) {
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]+))/i.exec(parameters);
    const relations = (rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/);
    if (relations.includes('next')) return url;
  }
  return undefined;
}

/** `Retry-After` in seconds: delay-seconds or an HTTP date (RFC 9110); undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(header)) return Number(header);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - now) / 1000);
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
