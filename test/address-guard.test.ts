import t from 'tap';
import { AddressGuard, embeddedIPv4, parseNetworks } from '../src/events/address-guard.js';

// Only the guard's own functions are called here: no address in this file is ever connected to.

t.test('every IPv6 form that embeds an IPv4 address is read for it', async (t) => {
  const forms: [string, string, string[]][] = [
    ['::10.0.0.1', 'IPv4-compatible', ['10.0.0.1']],
    ['::ffff:10.0.0.1', 'IPv4-mapped', ['10.0.0.1']],
    ['::ffff:0:10.0.0.1', 'IPv4-translated', ['10.0.0.1']],
    ['64:ff9b::10.0.0.1', 'NAT64', ['10.0.0.1']],
    ['2002:a00:1::1', '6to4', ['10.0.0.1']],
    // Server 65.54.227.120 in clear, client 192.0.2.45 XOR-ed (RFC 4380's example).
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo', ['65.54.227.120', '192.0.2.45']],
  ];
  for (const [address, form, ipv4] of forms) t.same(embeddedIPv4(address), { form, ipv4 }, address);
  t.match(embeddedIPv4('64:ff9b:1:a00:0:100::'), {
    form: 'NAT64',
    ipv4: ['10.0.0.1', '0.0.1.0', '0.1.0.0', '0.0.0.0'],
  });
  for (const plain of ['2a00:1450:4001:80b::200e', '::1', '::', 'fe80::1', '10.0.0.1']) {
    t.equal(embeddedIPv4(plain), undefined, `${plain} embeds nothing`);
  }
});

t.test('an embedded address is refused unless it is allowed on its own', async (t) => {
  const guard = new AddressGuard([]);
  const refused: [string, RegExp][] = [
    ['::127.0.0.1', /^::127\.0\.0\.1 embeds 127\.0\.0\.1 \(IPv4-compatible\): 127\.0\.0\.1 is a loopback address/],
    ['::10.0.0.1', /embeds 10\.0\.0\.1 \(IPv4-compatible\): .* private/],
    ['::ffff:169.254.169.254', /linklocal/],
    ['::ffff:0:192.168.1.1', /embeds 192\.168\.1\.1 \(IPv4-translated\): .* private/],
    ['64:ff9b::a9fe:a9fe', /embeds 169\.254\.169\.254 \(NAT64\): .* linklocal/],
    ['64:ff9b:1::10.0.0.1', /embeds .* \(NAT64\)/],
    ['2002:c0a8:101::1', /embeds 192\.168\.1\.1 \(6to4\): .* private/],
    ['2002:7f00:1::', /embeds 127\.0\.0\.1 \(6to4\): .* loopback/],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', /embeds 10\.0\.0\.1 \(Teredo\): .* private/],
    ['2001:0:a00:1::ffff:ffff', /embeds 10\.0\.0\.1 \(Teredo\)/],
  ];
  for (const [address, why] of refused) t.match(guard.refusal(address), why, address);
  for (const allowed of [
    '::8.8.8.8',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
    '2002:808:808::1',
    '2a00:1450:4001:80b::200e',
  ]) {
    t.equal(guard.refusal(allowed), undefined, `${allowed}: what it embeds, if anything, is public`);
  }

  const loopback = new AddressGuard(parseNetworks('loopback'));
  for (const address of ['::127.0.0.1', '::ffff:127.0.0.1', '2002:7f00:1::']) {
    t.equal(loopback.refusal(address), undefined, `${address} with loopback allowed`);
  }
  t.match(loopback.refusal('::10.0.0.1'), /private/, 'allowing loopback allows nothing else');
  const sixToFour = new AddressGuard(parseNetworks('2002::/16'));
  t.equal(sixToFour.refusal('2002:a00:1::1'), undefined, 'a network allowed as itself is allowed');
});
