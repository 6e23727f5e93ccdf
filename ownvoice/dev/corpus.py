"""A small multilingual corpus for training the text vocabulary of random checkpoints.

Only used to give random checkpoints a real byte-level BPE (merges that fire on ordinary text in
the ten Qwen3-TTS languages), so tokenizer tests compare something meaningful.
"""

CORPUS = {
    "en": """
The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore.
It was the best of times, and the weather was fine for a walk along the river.
We have 3 apples, 12 oranges and 1,250 grapes; the total is $45.99 today.
Could you read this sentence aloud, please? I'd like to hear how it sounds.
Tomorrow at 9:30 the train leaves from platform 4 for the city center.
Music, painting and writing are the things that make people happy.
The assistant answered the user, and the user thanked the assistant.
Reading books in the evening is a good habit for children and adults.
""",
    "de": """
Der schnelle braune Fuchs springt über den faulen Hund.
Dr. Müller kam am 3. Mai um 14 Uhr in die Praxis zurück.
Wir möchten heute Abend ins Theater gehen und danach essen.
Die Straße ist lang, aber das Wetter ist schön und die Sonne scheint.
Können Sie mir bitte sagen, wo der Bahnhof ist? Vielen Dank!
""",
    "zh": """
今天天气很好，我们一起去公园散步吧。
我叫通义千问，是阿里云的开源大模型。
这本书非常有意思，我已经读了三遍了。
北京是中国的首都，有很多历史悠久的建筑。
请问你明天下午有时间吗？我们可以一起喝咖啡。
""",
    "ja": """
今日はとても良い天気ですね。公園を散歩しましょう。
私は毎朝コーヒーを飲んでから仕事に行きます。
東京駅から新幹線で大阪まで行きました。
この本はとても面白いので、ぜひ読んでください。
""",
    "ko": """
오늘은 날씨가 정말 좋네요. 공원에 산책하러 갈까요?
저는 매일 아침 커피를 마시고 회사에 갑니다.
이 책은 정말 재미있어서 세 번이나 읽었어요.
서울은 한국의 수도이고 아주 큰 도시입니다.
""",
    "fr": """
Le renard brun rapide saute par-dessus le chien paresseux.
Nous allons au marché ce matin pour acheter du pain et du fromage.
C'est une très belle journée, n'est-ce pas ? Il fait beau et chaud.
L'été dernier, j'ai visité Paris avec ma famille.
""",
    "ru": """
Быстрая коричневая лиса прыгает через ленивую собаку.
Сегодня хорошая погода, давайте погуляем в парке.
Я люблю читать книги по вечерам и пить чай с лимоном.
Москва является столицей России и очень большим городом.
""",
    "pt": """
A rápida raposa marrom pula sobre o cão preguiçoso.
Hoje o tempo está ótimo para caminhar na praia com os amigos.
Você gostaria de tomar um café comigo amanhã à tarde?
O Brasil é um país muito grande, com muitas cidades bonitas.
""",
    "es": """
El rápido zorro marrón salta sobre el perro perezoso.
Mañana vamos a la playa si hace buen tiempo y sol.
¿Dónde está la estación de tren? ¡Muchas gracias por su ayuda!
Me gusta leer libros y escuchar música por la noche.
""",
    "it": """
La veloce volpe marrone salta sopra il cane pigro.
Oggi il tempo è bellissimo, andiamo a fare una passeggiata.
Vorrei un caffè e un cornetto, per favore. Grazie mille!
Roma è la capitale d'Italia ed è una città piena di storia.
""",
    "misc": """
user assistant user assistant user assistant
1 2 3 4 5 6 7 8 9 10 100 2024 3.14 50% #1 @home e-mail: test@example.com
😀 🎉 👍 ❤️ 🚀 ... --- !!! ??? (parenthesis) [brackets] {braces} "quotes" 'single'
""",
}
