import { readFile } from 'node:fs/promises';
import net from 'node:net';

/**
 * Which local user holds the other end of a TCP connection over loopback, read from the kernel's
 * socket tables (/proc/net/tcp and tcp6, Linux): the peer's socket is the one whose local end is
 * this connection's remote end, and its row names its owner's uid. null where that cannot be
 * told: another system, a connection that does not come from this machine's loopback, or a row
 * that is gone (the peer closed meanwhile).
 */
export async function loopbackPeerUid(socket: Pick<net.Socket, 'remoteAddress' | 'remotePort' | 'localAddress' | 'localPort'>): Promise<number | null> {
  if (process.platform !== 'linux') return null;
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (!remoteAddress || !remotePort || !localAddress || !localPort || !isLoopback(remoteAddress)) return null;
  const peer = endpoint(remoteAddress, remotePort);
  const ours = endpoint(localAddress, localPort);
  if (!peer || !ours) return null;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const rows = (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const row of rows) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
      const fields = row.trim().split(/\s+/);
      if (fields.length < 8) continue;
      if (procEndpoint(fields[1]) === peer && procEndpoint(fields[2]) === ours) return Number(fields[7]);
    }
  }
  return null;
}

const isLoopback = (address: string) => address === '::1' || /^(::ffff:)?127\./i.test(address);

/** An address and port as one comparable string: the address as 16 bytes (IPv4 as IPv4-mapped IPv6), in hex. */
function endpoint(address: string, port: number): string | null {
  const bytes = ipBytes(address);
  return bytes ? `${bytes.toString('hex')}:${port}` : null;
}

function ipBytes(address: string): Buffer | null {
  const v4 = /^(?:::ffff:)?(\d+)\.(\d+)\.(\d+)\.(\d+)$/i.exec(address);
  if (v4) return Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...v4.slice(1).map(Number)]);
  if (!net.isIPv6(address)) return null;
  const [head, tail] = address.includes('::') ? address.split('::') : [address, null];
  const groups = (part: string | null) => (part ? part.split(':').filter(Boolean) : []);
  const left = groups(head);
  const right = groups(tail);
  const all = tail === null ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  if (all.length !== 8) return null;
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(Number.parseInt(g, 16), i * 2));
  return out;
}

/**
 * A /proc/net/tcp{,6} endpoint (`0100007F:1F90`): the address in 32-bit words, each in the host's
 * byte order (little-endian here), and the port in hex.
 */
function procEndpoint(field: string): string | null {
  const [hexAddress, hexPort] = field.split(':');
  if (!hexAddress || !hexPort || (hexAddress.length !== 8 && hexAddress.length !== 32)) return null;
  const words = Buffer.from(hexAddress, 'hex');
  for (let i = 0; i < words.length; i += 4) words.subarray(i, i + 4).reverse();
  const bytes = words.length === 4 ? Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...words]) : words;
  return `${bytes.toString('hex')}:${Number.parseInt(hexPort, 16)}`;
}
