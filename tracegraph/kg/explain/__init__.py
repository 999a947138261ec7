"""Why a prediction: exact TracIn and the other explanation methods, training-graph filtering, faithfulness tests."""
