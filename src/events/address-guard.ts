import { lookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { BlockList, isIP } from 'node:net';
import { lookup as lookupCallback } from 'node:dns';
import ipaddr from 'ipaddr.js';

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

/** IPv4-compatible IPv6 (RFC 4291, deprecated): ipaddr.js has no range name for it. */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
/** 64:ff9b:1::/48 (RFC 8215) is for local use: a network picks its prefix length, /48 to /96. */
const LOCAL_USE_NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b:1::/48');

/** The IPv4 address at these bytes of an IPv6 address, each XOR-ed with `mask`. */
function ipv4At(bytes: readonly number[], at: readonly number[], mask = 0): string {
  return at.map((index) => (bytes[index] ?? 0) ^ mask).join('.');
}

/**
 * Where RFC 6052 puts the IPv4 address for each prefix length (byte 8 is always skipped): a
 * translator's prefix length is not in the address, so every length its range allows is read.
 */
const NAT64_LAYOUTS = { 48: [6, 7, 9, 10], 56: [7, 9, 10, 11], 64: [9, 10, 11, 12], 96: [12, 13, 14, 15] };

/** How an IPv6 address carries an IPv4 one, and the IPv4 addresses it may reach. */
interface Embedded {
  form: string;
  ipv4: string[];
}

/**
 * The IPv4 addresses an IPv6 address embeds, by ipaddr.js's range names: a packet to one of these
 * reaches (through a translator, a tunnel or the host's own stack) the IPv4 address inside.
 */
export function embeddedIPv4(address: string): Embedded | undefined {
  // ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d`: the dotted tail is given to it in hex.
  const hex = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_all, ...octets: string[]) => {
    const [a = 0, b = 0, c = 0, d = 0] = octets.slice(0, 4).map(Number);
    return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  });
  if (!ipaddr.IPv6.isValid(hex)) return undefined;
  const ip = ipaddr.IPv6.parse(hex);
  const bytes = ip.toByteArray();
  const last = [12, 13, 14, 15];
  switch (ip.range()) {
    case 'ipv4Mapped':
      return { form: 'IPv4-mapped', ipv4: [ip.toIPv4Address().toString()] };
    case 'rfc6145':
      return { form: 'IPv4-translated', ipv4: [ipv4At(bytes, last)] };
    case 'rfc6052': {
      const layouts = ip.match(LOCAL_USE_NAT64) ? Object.values(NAT64_LAYOUTS) : [NAT64_LAYOUTS[96]];
      return { form: 'NAT64', ipv4: [...new Set(layouts.map((at) => ipv4At(bytes, at)))] };
    }
    case '6to4':
      return { form: '6to4', ipv4: [ipv4At(bytes, [2, 3, 4, 5])] };
    case 'teredo':
      // The Teredo server in clear, and the client XOR-ed (RFC 4380): both are reached.
      return { form: 'Teredo', ipv4: [ipv4At(bytes, [4, 5, 6, 7]), ipv4At(bytes, last, 0xff)] };
    case 'unicast':
      return ip.match(IPV4_COMPATIBLE) ? { form: 'IPv4-compatible', ipv4: [ipv4At(bytes, last)] } : undefined;
    default:
      return undefined;
  }
}

/** A port in a URL's authority, as written (the URL parser refuses one over 65535 without saying so). */
const PORT = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*:([0-9]+)(?:[/?#]|$)/i;

/**
 * `text` as an http or https URL with a port that can be connected to. Throws RefusedAddress saying
 * what is wrong: not a URL, its port, or its scheme.
 */
export function webhookUrl(text: string): URL {
  const port = PORT.exec(text)?.[1];
  if (port !== undefined && (Number(port) > 65535 || Number(port) === 0)) {
    throw new RefusedAddress(`port ${port} is out of range: a port is 1 to 65535`);
  }
  if (!URL.canParse(text)) throw new RefusedAddress('not a valid URL');
  const parsed = new URL(text);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new RefusedAddress('only http and https URLs are allowed');
  }
  return parsed;
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

  /**
   * Why the server must not connect to this address, or undefined when it may. An IPv6 address
   * that embeds IPv4 ones (embeddedIPv4) is refused unless each of them is allowed on its own.
   */
  refusal(address: string): string | undefined {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (this.allowed.check(address, family)) return undefined;
    for (const [name, list] of this.refused) {
      if (list.check(address, family)) return `${address} is a ${name} address; WEBHOOK_ALLOWED_NETWORKS can allow it`;
    }
    const embedded = family === 'ipv6' ? embeddedIPv4(address) : undefined;
    for (const ipv4 of embedded?.ipv4 ?? []) {
      const why = this.refusal(ipv4);
      if (why !== undefined) return `${address} embeds ${ipv4} (${embedded?.form}): ${why}`;
    }
    return undefined;
  }

  /** Checks a URL as registered: scheme, no credentials, and every address its host resolves to. Throws RefusedAddress. */
  async check(url: string): Promise<void> {
    const parsed = webhookUrl(url);
    if (parsed.username !== '' || parsed.password !== '') {
      throw new RefusedAddress(
        'credentials (user:password@) are not taken in a URL: they would be kept and sent with every message; receivers authenticate a message by its signature',
      );
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
