import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { loopbackPeerUid } from './peer-uid.js';

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

  it('tells nothing of a connection from another machine, or of one that is gone', async () => {
    expect(await loopbackPeerUid({ remoteAddress: '10.1.2.3', remotePort: 5000, localAddress: '10.1.2.4', localPort: 80 })).toBeNull();
    expect(await loopbackPeerUid({ remoteAddress: '127.0.0.1', remotePort: 1, localAddress: '127.0.0.1', localPort: 2 })).toBeNull();
  });
});
