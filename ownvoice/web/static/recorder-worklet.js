// Runs on the audio thread: hands the first input channel to the page in blocks of ~0.1 s.
class Recorder extends AudioWorkletProcessor {
  constructor() {
    super();
    this.block = [];
    this.size = 0;
    this.port.onmessage = () => this.flush();
  }

  flush() {
    if (!this.size) return;
    const out = new Float32Array(this.size);
    let at = 0;
    for (const piece of this.block) {
      out.set(piece, at);
      at += piece.length;
    }
    this.port.postMessage(out, [out.buffer]);
    this.block = [];
    this.size = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      this.block.push(new Float32Array(channel));
      this.size += channel.length;
      if (this.size >= sampleRate / 10) this.flush();
    }
    return true;
  }
}

registerProcessor("recorder", Recorder);
