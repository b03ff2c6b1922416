import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { ipv6Bytes } from './address-policy.js';

type Ends = Pick<Socket, 'remoteAddress' | 'remotePort' | 'localAddress' | 'localPort'>;

/** The kernel's state of a TCP socket that is connected, in /proc/net/tcp's hex. */
const ESTABLISHED = '01';

/**
 * Whether a connection comes from a process of this machine whose owner the kernel's socket
 * tables can tell (Linux): its remote address is loopback, or one of this machine's own addresses
 * (svc listening on all of them, reached at its LAN address from here).
 */
export function fromThisMachine(socket: Pick<Socket, 'remoteAddress'>): boolean {
  const address = socket.remoteAddress;
  if (process.platform !== 'linux' || !address) return false;
  if (isLoopback(address)) return true;
  const bare = address.replace(/^::ffff:(?=\d+\.)/i, '');
  return Object.values(networkInterfaces()).some((all) => all?.some((i) => i.address === bare));
}

/**
 * Which local user holds the other end of a TCP connection from this machine, read from the
 * kernel's socket tables (/proc/net/tcp and tcp6, Linux): the peer's socket is the one whose local
 * end is this connection's remote end, and its row names its owner's uid. null where that cannot
 * be told: another system, a connection from another machine, or a peer socket that no process
 * holds any more. A peer that closed its end lingers in FIN_WAIT2 and then TIME_WAIT as a bare
 * row the kernel shows with uid 0 and no inode, whoever owned it; so only a row in ESTABLISHED
 * held by a process (inode not 0) tells an owner, and a uid 0 from it is root's indeed.
 */
export async function loopbackPeerUid(socket: Ends): Promise<number | null> {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (!remoteAddress || !remotePort || !localAddress || !localPort || !fromThisMachine(socket)) return null;
  const peer = endpoint(remoteAddress, remotePort);
  const ours = endpoint(localAddress, localPort);
  if (!peer || !ours) return null;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const rows = (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const row of rows) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
      const fields = row.trim().split(/\s+/);
      if (fields.length < 10) continue;
      if (procEndpoint(fields[1]) !== peer || procEndpoint(fields[2]) !== ours) continue;
      return fields[3] === ESTABLISHED && fields[9] !== '0' ? Number(fields[7]) : null;
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
  if (isIPv4(address)) return Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...address.split('.').map(Number)]);
  const bytes = isIPv6(address) ? ipv6Bytes(address) : null;
  return bytes ? Buffer.from(bytes) : null;
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
