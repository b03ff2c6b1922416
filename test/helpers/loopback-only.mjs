// Preloaded into third-party test servers that listen on all interfaces by default: binds them to
// 127.0.0.1 instead and prints the real port ("LISTENING <port>") on stderr.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenOnLoopback(...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a !== 'string');
    this.once('listening', () => process.stderr.write(`LISTENING ${this.address().port}\n`));
    return listen.call(this, port, '127.0.0.1', ...rest);
  }
  return listen.apply(this, args);
};
