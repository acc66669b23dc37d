import type { ClaimedDelivery } from '../storage/types.js';
import type { VersionedEvent } from '../versions/change.js';
import type { VersionChain } from '../versions/chain.js';

/**
 * What each delivery sends: the outbox keeps an event's payload in the newest API version, and an
 * endpoint of an older one gets it migrated down through the version changes since (their
 * `eventDown`s), so that it receives what its version's contract describes. The migration is made
 * per delivery, before signing: the signature is over exactly the bytes sent.
 */
export class PayloadVersions {
  /** The versions served whose payloads some change migrates; the others are sent as kept. */
  private readonly migrating: Set<number>;
  /** Each version served by its name as endpoints give it (`v2`). */
  private readonly byName: Map<string, number>;

  constructor(private readonly chain: VersionChain) {
    this.byName = new Map(chain.versions.map(({ major }) => [`v${major}`, major]));
    this.migrating = new Set(
      chain.versions
        .map(({ major }) => major)
        .filter((major) => chain.changesSince(major).some((change) => change.eventDown !== undefined)),
    );
  }

  /**
   * A reader of one claim's payloads, each in its endpoint's version: an event claimed for several
   * endpoints of one version is migrated once. It throws, naming it, for a version not served here
   * (an endpoint set by a newer server, say): that attempt fails and is retried as any other.
   */
  forClaim(): (delivery: ClaimedDelivery) => string {
    const migrated = new Map<string, string>();
    return (delivery) => {
      const major = this.majorOf(delivery);
      if (!this.migrating.has(major)) return delivery.body;
      const key = `${delivery.eventId} ${major}`;
      let body = migrated.get(key);
      if (body === undefined) {
        const event: VersionedEvent = {
          type: delivery.eventType,
          payload: JSON.parse(delivery.body) as VersionedEvent['payload'],
        };
        body = JSON.stringify(this.chain.eventDown(major, event).payload);
        migrated.set(key, body);
      }
      return body;
    };
  }

  private majorOf({ apiVersion, endpointId }: ClaimedDelivery): number {
    const major = this.byName.get(apiVersion);
    if (major === undefined) {
      throw new Error(`endpoint ${endpointId} receives API version ${apiVersion}, which this server does not serve`);
    }
    return major;
  }
}
