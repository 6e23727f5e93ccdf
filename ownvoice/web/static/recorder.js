// The microphone, recorded as raw samples (no lossy codec: the reference of a cloned voice
// should be the voice itself). Echo cancellation, noise suppression and gain control are off
// for the same reason. The samples come from an AudioWorklet (recorder-worklet.js).

export class MicRecorder {
  async start() {
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 },
    });
    this.context = new AudioContext();
    await this.context.audioWorklet.addModule("/static/recorder-worklet.js");
    const source = this.context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.context, "recorder");
    this.pieces = [];
    this.node.port.onmessage = (event) => this.pieces.push(event.data);
    source.connect(this.node);
  }

  /** Stop; returns {samples: Float32Array, rate}. */
  async stop() {
    this.node.port.postMessage("flush");
    await new Promise((resolve) => setTimeout(resolve, 50)); // the last block's message
    for (const track of this.stream.getTracks()) track.stop();
    const rate = this.context.sampleRate;
    await this.context.close();
    const n = this.pieces.reduce((sum, p) => sum + p.length, 0);
    const samples = new Float32Array(n);
    let at = 0;
    for (const piece of this.pieces) {
      samples.set(piece, at);
      at += piece.length;
    }
    return { samples, rate };
  }
}
