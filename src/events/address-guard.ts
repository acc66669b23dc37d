import { lookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { BlockList, isIP } from 'node:net';
import { lookup as lookupCallback } from 'node:dns';

/** The address ranges no delivery reaches unless WEBHOOK_ALLOWED_NETWORKS names them. */
const REFUSED_NETWORKS = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  cgnat: ['100.64.0.0/10'],
  multicast: ['224.0.0.0/4', 'ff00::/8'],
  unspecified: ['0.0.0.0/8', '::/128'],
  reserved: ['240.0.0.0/4'],
} as const;

type NetworkName = keyof typeof REFUSED_NETWORKS;

/** A named network (`loopback`) or a CIDR (`10.0.0.0/8`) that WEBHOOK_ALLOWED_NETWORKS allows. */
export type Network = NetworkName | { cidr: string };

function isNetworkName(name: string): name is NetworkName {
  return Object.hasOwn(REFUSED_NETWORKS, name);
}

function addCidr(list: BlockList, cidr: string): void {
  const [address = '', prefix = ''] = cidr.split('/');
  const family = isIP(address);
  list.addSubnet(address, Number(prefix), family === 6 ? 'ipv6' : 'ipv4');
}

/** WEBHOOK_ALLOWED_NETWORKS: comma-separated names (loopback, private, ...) and CIDRs. */
export function parseNetworks(value: string): Network[] {
  return value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => {
      if (isNetworkName(part)) return part;
      const [address = '', prefix, ...rest] = part.split('/');
      const family = isIP(address);
      const bits = Number(prefix);
      if (family === 0 || rest.length > 0 || !/^[0-9]{1,3}$/.test(prefix ?? '') || bits > (family === 4 ? 32 : 128)) {
        throw new Error(
          `WEBHOOK_ALLOWED_NETWORKS must list ${Object.keys(REFUSED_NETWORKS).join(', ')} or CIDRs such as 10.0.0.0/8; got "${part}"`,
        );
      }
      return { cidr: part };
    });
}

/** Why a URL is refused: said in the 400 and in a failed attempt. */
export class RefusedAddress extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedAddress';
  }
}

/**
 * Where deliveries may go: http(s) URLs whose host is, and resolves to, no address of a refused
 * network unless allowed. Checked at registration and on the address each delivery connects to.
 */
export class AddressGuard {
  private readonly allowed = new BlockList();
  private readonly refused = new Map<NetworkName, BlockList>();

  constructor(allowedNetworks: readonly Network[]) {
    for (const network of allowedNetworks) {
      const cidrs = typeof network === 'string' ? REFUSED_NETWORKS[network] : [network.cidr];
      for (const cidr of cidrs) addCidr(this.allowed, cidr);
    }
    for (const [name, cidrs] of Object.entries(REFUSED_NETWORKS)) {
      const list = new BlockList();
      for (const cidr of cidrs) addCidr(list, cidr);
      this.refused.set(name as NetworkName, list);
    }
  }

  /** Why the server must not connect to this address, or undefined when it may. */
  refusal(address: string): string | undefined {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    const ip = mapped ?? address;
    const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
    if (this.allowed.check(ip, family)) return undefined;
    for (const [name, list] of this.refused) {
      if (list.check(ip, family)) return `${address} is a ${name} address; WEBHOOK_ALLOWED_NETWORKS can allow it`;
    }
    return undefined;
  }

  /** Checks a URL as registered: scheme, and every address its host resolves to. Throws RefusedAddress. */
  async check(url: string): Promise<void> {
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      throw new RefusedAddress('only http and https URLs are allowed');
    }
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0) {
      this.assertAllowed(host);
      return;
    }
    let addresses: { address: string }[];
    try {
      addresses = await lookup(host, { all: true });
    } catch {
      throw new RefusedAddress(`${host} does not resolve`);
    }
    for (const { address } of addresses) this.assertAllowed(address, host);
  }

  private assertAllowed(address: string, host?: string): void {
    const why = this.refusal(address);
    if (why !== undefined) throw new RefusedAddress(host === undefined ? why : `${host} resolves to ${why}`);
  }

  /**
   * A `lookup` for http.request: the name is resolved, and refused if any address it resolves to is,
   * so the address connected to is one that was checked.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    lookupCallback(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) {
        callback(error, '', 4);
        return;
      }
      for (const { address } of addresses) {
        const why = this.refusal(address);
        if (why !== undefined) {
          callback(new RefusedAddress(`${hostname} resolves to ${why}`), '', 4);
          return;
        }
      }
      if (options.all === true) {
        (callback as unknown as (e: null, a: typeof addresses) => void)(null, addresses);
        return;
      }
      const [first] = addresses;
      callback(null, first?.address ?? '', first?.family ?? 4);
    });
  };
}
