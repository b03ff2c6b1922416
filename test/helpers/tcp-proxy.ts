/**
 * A loopback TCP relay that can be frozen: while frozen nothing passes either way and new
 * connections wait unanswered, as when a database host stops answering (a network partition, a
 * stopped VM) rather than refusing. Thawed, everything flows again.
 */
import net, { type AddressInfo } from 'node:net';

export interface TcpProxy {
  port: number;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let frozen = false;
  const sockets = new Set<net.Socket>();
  const waiting: (() => void)[] = [];
  const pairs: [net.Socket, net.Socket][] = [];
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const relay = (client: net.Socket) => {
    const upstream = net.connect(targetPort, targetHost);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    pairs.push([client, upstream]);
    if (frozen) {
      client.pause();
      upstream.pause();
    }
  };
  const server = net.createServer((client) => {
    track(client);
    if (frozen) {
      client.pause();
      waiting.push(() => relay(client));
    } else relay(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    freeze() {
      frozen = true;
      for (const [a, b] of pairs) {
        a.pause();
        b.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const [a, b] of pairs) {
        if (!a.destroyed) a.resume();
        if (!b.destroyed) b.resume();
      }
      for (const start of waiting.splice(0)) start();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
