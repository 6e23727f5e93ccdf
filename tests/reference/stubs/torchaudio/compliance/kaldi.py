"""Inert stub: qwen_tts imports this for its 25 Hz tokenizer, which the tests never use."""
