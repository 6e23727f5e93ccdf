// Plays the server's 24 kHz 16-bit PCM while it streams in: each piece is scheduled right
// after the one before, so playback starts with the first piece and has no gaps. Keeps the
// samples for a WAV of the whole result.

export const RATE = 24000;
const LEAD_S = 0.05; // first piece starts this long after it arrives (scheduling slack)

let context = null;

/** The page's one AudioContext, resumed (call from a click: browsers want a gesture). */
export async function audioContext() {
  if (!context) context = new AudioContext({ sampleRate: RATE });
  if (context.state !== "running") await context.resume();
  return context;
}

export class StreamPlayer {
  constructor(context) {
    this.context = context;
    this.sources = [];
    this.pieces = [];
    this.samples = 0;
    this.peak = 0;
    this.played = 0; // samples whose playback ended
    this.firstPlayMs = null; // performance.now() at which the first piece starts sounding
    this.next = 0;
    this.carry = null; // an odd byte left from the last piece
    this.stopped = false;
    this.wake = null; // resolves whenPlayed() early, on stop()
  }

  /** Whether scheduled audio is still sounding. */
  get playing() {
    return !this.stopped && this.context.currentTime < this.next;
  }

  /** Resolves once everything scheduled so far has played, or at stop(). */
  whenPlayed() {
    if (!this.playing) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, (this.next - this.context.currentTime) * 1000 + 50);
      this.wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  /** Schedule a piece of s16le bytes (a Uint8Array). */
  push(bytes) {
    if (this.carry !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.carry;
      joined.set(bytes, 1);
      bytes = joined;
      this.carry = null;
    }
    if (bytes.length % 2) {
      this.carry = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const n = bytes.length / 2;
    if (n === 0) return;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const samples = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const x = view.getInt16(2 * i, true) / 32768;
      samples[i] = x;
      const a = Math.abs(x);
      if (a > this.peak) this.peak = a;
    }
    this.pieces.push(samples);
    this.samples += n;
    const buffer = this.context.createBuffer(1, n, RATE);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const now = this.context.currentTime;
    const at = Math.max(this.next, now + LEAD_S);
    source.start(at);
    source.onended = () => { this.played += n; };
    if (this.firstPlayMs === null) this.firstPlayMs = performance.now() + (at - now) * 1000;
    this.next = at + n / RATE;
    this.sources.push(source);
  }

  stop() {
    this.stopped = true;
    for (const source of this.sources) {
      try { source.stop(); } catch { /* already ended */ }
    }
    if (this.wake) this.wake();
  }

  audio() {
    const out = new Float32Array(this.samples);
    let at = 0;
    for (const piece of this.pieces) {
      out.set(piece, at);
      at += piece.length;
    }
    return out;
  }
}

/** A mono 16-bit WAV file of float samples. */
export function wavBlob(samples, rate = RATE) {
  const data = new DataView(new ArrayBuffer(44 + 2 * samples.length));
  const text = (at, s) => { for (let i = 0; i < s.length; i++) data.setUint8(at + i, s.charCodeAt(i)); };
  text(0, "RIFF");
  data.setUint32(4, 36 + 2 * samples.length, true);
  text(8, "WAVE");
  text(12, "fmt ");
  data.setUint32(16, 16, true);
  data.setUint16(20, 1, true); // PCM
  data.setUint16(22, 1, true); // mono
  data.setUint32(24, rate, true);
  data.setUint32(28, rate * 2, true);
  data.setUint16(32, 2, true);
  data.setUint16(34, 16, true);
  text(36, "data");
  data.setUint32(40, 2 * samples.length, true);
  for (let i = 0; i < samples.length; i++) {
    // x * 32768 rounds back to the server's own 16-bit values exactly
    data.setInt16(44 + 2 * i, Math.max(-32768, Math.min(32767, Math.round(samples[i] * 32768))), true);
  }
  return new Blob([data.buffer], { type: "audio/wav" });
}
