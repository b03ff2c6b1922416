import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/helpers/wait.js';
import { loopbackPeerUid } from './peer-uid.js';

const FIN_WAIT2_ORPHANED = '05 inode 0';
const TIME_WAIT = '06 inode 0';

/** The state (hex) of the client's row for these ends, and whether a process still holds it (inode 0: none). */
async function tableState(ends: { remotePort?: number; localPort?: number }): Promise<string | null> {
  const hex = (port?: number) => (port ?? 0).toString(16).toUpperCase().padStart(4, '0');
  const rows = (await readFile('/proc/net/tcp', 'utf8')).split('\n').map((row) => row.trim().split(/\s+/));
  const row = rows.find((f) => f[1]?.endsWith(`:${hex(ends.remotePort)}`) && f[2]?.endsWith(`:${hex(ends.localPort)}`));
  return row ? `${row[3]}${row[9] === '0' ? ' inode 0' : ''}` : null;
}

/** The server's side of a connection made to `host`, on a server listening on `listen`. */
async function accepted(listen: string, host: string): Promise<{ socket: net.Socket; close: () => void }> {
  const server = net.createServer();
  const got = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, listen, resolve));
  const client = net.connect((server.address() as net.AddressInfo).port, host);
  const socket = await got;
  return {
    socket,
    close: () => {
      client.destroy();
      socket.destroy();
      server.close();
    },
  };
}

describe.skipIf(process.platform !== 'linux')('the local user at the other end of a loopback connection', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::1', '::1'],
    // a dual-stack listener sees an IPv4 client as ::ffff:127.0.0.1
    ['::', '127.0.0.1'],
  ])('listening on %s, a client of %s is this process’s user', async (listen, host) => {
    const c = await accepted(listen, host);
    try {
      expect(await loopbackPeerUid(c.socket)).toBe(process.getuid!());
    } finally {
      c.close();
    }
  });

  // The client closes first: its socket lingers (FIN_WAIT2 once its process let go of it, then
  // TIME_WAIT), as a row that the kernel shows as uid 0 whoever owned it. That is no owner, and
  // never this process's user, though it runs as root.
  it('tells nothing of a client that has closed its end', async () => {
    const server = net.createServer({ allowHalfOpen: true });
    const got = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const socket = await got;
    const { remoteAddress, remotePort, localAddress, localPort } = socket;
    const ends = { remoteAddress, remotePort, localAddress, localPort };
    try {
      await new Promise<void>((resolve) => {
        socket.once('end', resolve);
        client.end();
      });
      client.destroy();
      await eventually(async () => (await tableState(ends)) === FIN_WAIT2_ORPHANED, 'the client’s socket to be let go of');
      expect(await loopbackPeerUid(ends), 'FIN_WAIT2').toBeNull();
      socket.end();
      await eventually(async () => (await tableState(ends)) === TIME_WAIT, 'the client’s socket to wait in TIME_WAIT');
      expect(await loopbackPeerUid(ends), 'TIME_WAIT').toBeNull();
    } finally {
      socket.destroy();
      server.close();
    }
  });

  it('tells nothing of a connection from another machine, or of one that is gone', async () => {
    expect(await loopbackPeerUid({ remoteAddress: '10.1.2.3', remotePort: 5000, localAddress: '10.1.2.4', localPort: 80 })).toBeNull();
    expect(await loopbackPeerUid({ remoteAddress: '127.0.0.1', remotePort: 1, localAddress: '127.0.0.1', localPort: 2 })).toBeNull();
  });
});
