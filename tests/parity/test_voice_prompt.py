"""Voice-clone prompts: speaker embedding, mel and reference codes equal the reference's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.parity.scenarios import REF_TEXT, reference_clip
from tests.reference import import_reference

pytestmark = pytest.mark.reference


@pytest.mark.parametrize("like", ["0.6B-Base", "1.7B-Base"])
def test_voice_prompt_matches_reference(like, reference_models, our_engines):
    clip = reference_clip(sr=44100, seconds=3.1)
    ref_item = reference_models(like).create_voice_clone_prompt(clip, ref_text=REF_TEXT)[0]
    ours = our_engines(like).make_voice(clip, ref_text=REF_TEXT)
    ref_codes = ref_item.ref_code.numpy()
    assert ours.ref_codes.shape == ref_codes.shape, (ours.ref_codes.shape, ref_codes.shape)
    assert np.array_equal(ours.ref_codes.numpy(), ref_codes)
    assert len(np.unique(ref_codes[:, 0])) > 1, "reference codes are constant: blind comparison"
    emb_ref = ref_item.ref_spk_embedding.float()
    assert emb_ref.std() > 1e-3, "speaker embedding near zero: blind comparison"
    torch.testing.assert_close(ours.speaker_embedding, emb_ref, atol=1e-5, rtol=1e-5)


def test_mel_matches_reference():
    import_reference()
    from qwen_tts.core.models.modeling_qwen3_tts import mel_spectrogram

    from ownvoice.model.mel import log_mel_spectrogram

    wav, sr = reference_clip(sr=24000, seconds=1.7)
    x = torch.from_numpy(wav)[None]
    ref = mel_spectrogram(
        x,
        n_fft=1024,
        num_mels=128,
        sampling_rate=24000,
        hop_size=256,
        win_size=1024,
        fmin=0,
        fmax=12000,
    ).transpose(1, 2)
    ours = log_mel_spectrogram(torch.from_numpy(wav))
    torch.testing.assert_close(ours.reshape(ref.shape), ref, atol=1e-5, rtol=1e-5)


def test_different_voices_give_different_embeddings(our_engines):
    engine = our_engines("0.6B-Base")
    a = engine.make_voice(reference_clip(seed=1), x_vector_only=True).speaker_embedding
    b = engine.make_voice(reference_clip(seed=2), x_vector_only=True).speaker_embedding
    assert (a - b).norm() > 0.1 * a.norm()
