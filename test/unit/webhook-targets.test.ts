// Webhook targets, signing and backoff: the pure parts of webhook delivery, without a database.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../src/config';
import { DEV_DEFAULTS } from '../../src/cli';
import { retryDelayMs } from '../../src/webhooks/backoff';
import { WebhookSender } from '../../src/webhooks/sender';
import { newWebhookSecret, signatureHeaders } from '../../src/webhooks/signing';
import { guardedLookup, refusalOfAddress, refusalOfUrl, type ResolveHost } from '../../src/webhooks/targets';

describe('refusalOfAddress', () => {
  test.each([
    ['169.254.169.254', /cloud metadata/],
    ['169.254.10.1', /link-local/],
    ['fe80::1', /link-local/],
    ['fd00:ec2::254', /cloud metadata/],
    ['100.100.100.200', /cloud metadata/],
    ['168.63.129.16', /cloud metadata/],
    ['::ffff:169.254.169.254', /cloud metadata/],
    ['64:ff9b::a9fe:a9fe', /cloud metadata/],
    // IPv4 inside IPv6: IPv4-compatible, 6to4, local-use NAT64 (RFC 8215), Teredo (client inverted).
    ['::a9fe:a9fe', /^::a9fe:a9fe \(169\.254\.169\.254\) is a cloud metadata/],
    ['2002:a9fe:a9fe::', /cloud metadata/],
    ['2002:a9fe:a9fe::1', /cloud metadata/],
    ['64:ff9b:1:a9fe:a9:fe00::', /cloud metadata/],
    ['2001:0:4136:e378:8000:63bf:5601:5601', /cloud metadata/],
    ['2002:a9fe:0a01::', /link-local/],
    ['0.0.0.0', /unspecified/],
    ['::', /unspecified/],
    ['224.0.0.1', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['240.0.0.1', /reserved/],
    ['192.0.2.10', /reserved/],
  ])('%s is refused always, private targets allowed or not', (address, why) => {
    expect(refusalOfAddress(address, true)).toMatch(why);
    expect(refusalOfAddress(address, false)).toMatch(why);
  });

  test.each(['10.0.0.1', '172.16.5.4', '192.168.1.1', '127.0.0.1', '::1', 'fd12:3456::1', '100.64.0.1', '::ffff:10.1.2.3', '64:ff9b::7f00:1', '::10.0.0.1', '2002:0a00:0001::1', '2002:7f00:0001::', '64:ff9b:1:0a00:00:0100::', '2001::f5ff:fffe'])(
    '%s is refused unless the operator allows private targets',
    (address) => {
      expect(refusalOfAddress(address, false)).toMatch(/only when the operator allows private targets/);
      expect(refusalOfAddress(address, true)).toBeUndefined();
    },
  );

  test.each(['93.184.216.34', '1.1.1.1', '2606:4700::1111', '2002:0808:0808::1', '64:ff9b:1:0808:08:0800::', '2001:0:4136:e378:8000:63bf:f7f7:f7f7'])('%s, a public address, is allowed', (address) => {
    expect(refusalOfAddress(address, false)).toBeUndefined();
  });
});

describe('refusalOfUrl', () => {
  const resolving =
    (table: Record<string, string[]>): ResolveHost =>
    async (host) => {
      const found = table[host];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
  const policy = { allowPrivate: false, resolve: resolving({ 'hooks.example.com': ['93.184.216.34'], 'inside.example.com': ['93.184.216.34', '10.0.0.7'], 'rebind.example.com': ['169.254.169.254'] }) };

  test.each([
    ['ftp://hooks.example.com/x', /http or https/],
    ['not a url', /absolute URL/],
    ['https://user:pw@hooks.example.com/', /credentials/],
    ['http://169.254.169.254/latest/meta-data/', /cloud metadata/],
    ['http://[fe80::1]/', /link-local/],
    ['http://metadata.google.internal/computeMetadata/v1/', /metadata endpoint/],
    ['http://METADATA.GOOGLE.INTERNAL./', /metadata endpoint/],
    ['http://2852039166/', /cloud metadata/],
    ['http://10.0.0.1/', /private/],
    ['http://127.0.0.1:8080/', /loopback/],
    ['https://inside.example.com/', /^its host inside\.example\.com resolves to a private address/],
    ['https://rebind.example.com/', /^its host rebind\.example\.com resolves to a cloud metadata address/],
    ['https://nowhere.example.com/', /does not resolve \(ENOTFOUND\)/],
  ])('refuses %s', async (url, why) => {
    expect(await refusalOfUrl(url, policy)).toMatch(why);
  });

  test('allows a public name, and private addresses when the operator does', async () => {
    expect(await refusalOfUrl('https://hooks.example.com/stepwise', policy)).toBeUndefined();
    expect(await refusalOfUrl('http://127.0.0.1:8080/hook', { ...policy, allowPrivate: true })).toBeUndefined();
    expect(await refusalOfUrl('https://inside.example.com/', { ...policy, allowPrivate: true })).toBeUndefined();
    expect(await refusalOfUrl('http://169.254.169.254/', { ...policy, allowPrivate: true })).toMatch(/cloud metadata/);
  });
});

describe('the sender checks the address it connects to', () => {
  let server: http.Server;
  let port: number;
  const hits: string[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  test('a name that resolves to a refused address fails the attempt before anything is sent', async () => {
    const sender = new WebhookSender({ policy: { allowPrivate: true, resolve: async () => [{ address: '169.254.169.254', family: 4 }] }, timeoutMs: 2000 });
    const result = await sender.send(`http://rebound.test:${port}/a`, '{}', {});
    sender.close();
    expect(result).toMatchObject({ delivered: false, statusCode: null, error: expect.stringMatching(/^refused target: rebound\.test resolves to a cloud metadata address/) });
    // What the server's DNS answered is not told.
    expect(result.error).not.toContain('169.254');
    expect(hits).not.toContain('/a');
  });

  test('a loopback name connects only while private targets are allowed', async () => {
    const resolve: ResolveHost = async () => [{ address: '127.0.0.1', family: 4 }];
    const refused = new WebhookSender({ policy: { allowPrivate: false, resolve }, timeoutMs: 2000 });
    expect((await refused.send(`http://receiver.test:${port}/b`, '{}', {})).error).toMatch(/refused target: .*loopback/);
    refused.close();
    const allowed = new WebhookSender({ policy: { allowPrivate: true, resolve }, timeoutMs: 2000 });
    expect(await allowed.send(`http://receiver.test:${port}/c`, '{}', {})).toMatchObject({ delivered: true, statusCode: 204, error: null });
    allowed.close();
    expect(hits).toEqual(['/c']);
  });

  test('an address literal is checked without a lookup', async () => {
    const sender = new WebhookSender({ policy: { allowPrivate: false }, timeoutMs: 2000 });
    expect((await sender.send(`http://127.0.0.1:${port}/d`, '{}', {})).error).toMatch(/refused target: 127\.0\.0\.1 is a loopback address/);
    sender.close();
  });

  test('guardedLookup answers all addresses, or one of the family asked for', async () => {
    const lookup = guardedLookup({ allowPrivate: false, resolve: async () => [{ address: '2606:4700::1111', family: 6 }, { address: '1.1.1.1', family: 4 }] });
    const all = await new Promise((resolve) => lookup('x.test', { all: true }, (err, addresses) => resolve(err ?? addresses)));
    expect(all).toEqual([{ address: '2606:4700::1111', family: 6 }, { address: '1.1.1.1', family: 4 }]);
    const v4 = await new Promise((resolve) => lookup('x.test', { family: 4 }, (err, address, family) => resolve(err ?? [address, family])));
    expect(v4).toEqual(['1.1.1.1', 4]);
  });
});

describe('signing', () => {
  test('a signature verifies with the standardwebhooks package and the secret shown at subscription', () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const body = JSON.stringify({ type: 'execution.completed', data: { ü: '✓' } });
    const headers = signatureHeaders(secret, 'd7e4c1a0-0000-4000-8000-000000000001', body);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow(/No matching signature/);
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow(/No matching signature/);
  });
});

describe('retry backoff', () => {
  test('the first retry comes within 10 s, later ones grow up to 6 h, each within ±20 %', () => {
    const base = 5000;
    const mid = (n: number) => retryDelayMs(n, base, () => 0.5);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20].map(mid)).toEqual([5000, 30000, 120000, 600000, 1800000, 3600000, 7200000, 14400000, 21600000, 21600000, 21600000]);
    expect(retryDelayMs(1, base, () => 0)).toBe(4000);
    expect(retryDelayMs(1, base, () => 0.999999)).toBeLessThanOrEqual(6000);
  });
});

describe('webhook configuration', () => {
  test('private targets are refused by default and allowed by STEPWISE_WEBHOOKS_ALLOW_PRIVATE', () => {
    expect(loadConfig({ env: {} }).webhooks).toEqual({ allowPrivateTargets: false, concurrency: 16, timeoutMs: 10000, retryBaseMs: 5000, retryForMs: 86400000, pollIntervalMs: 1000 });
    expect(loadConfig({ env: { STEPWISE_WEBHOOKS_ALLOW_PRIVATE: 'true' } }).webhooks.allowPrivateTargets).toBe(true);
    expect(loadConfig({ env: { STEPWISE_WEBHOOKS_ALLOW_PRIVATE: '0' } }).webhooks.allowPrivateTargets).toBe(false);
    expect(() => loadConfig({ env: { STEPWISE_WEBHOOKS_ALLOW_PRIVATE: 'maybe' } })).toThrow(/STEPWISE_WEBHOOKS_ALLOW_PRIVATE must be true or false/);
  });

  test('stepwise dev allows private targets unless the environment says otherwise', () => {
    expect(loadConfig({ env: {}, defaults: DEV_DEFAULTS }).webhooks.allowPrivateTargets).toBe(true);
    expect(loadConfig({ env: { STEPWISE_WEBHOOKS_ALLOW_PRIVATE: 'false' }, defaults: DEV_DEFAULTS }).webhooks.allowPrivateTargets).toBe(false);
  });
});

test("a refusal never names what the server's DNS answered", async () => {
  for (const url of ['https://inside.example.com/', 'https://rebind.example.com/']) {
    expect(await refusalOfUrl(url, { allowPrivate: false, resolve: async (host) => [{ address: host.startsWith('inside') ? '10.0.0.7' : '169.254.169.254', family: 4 }] })).not.toMatch(/10\.0\.0\.7|169\.254/);
  }
});
