-- Address points (CONTRACT §11, issue 28): precise coordinates for street addresses, loaded
-- by `dropslot addresses import` and matched by street number and street name. Every key is
-- folded by the core (`geo::street`, `geo::points`): `number` ("290", "12a"), `street`
-- ("bremner boulevard"), `unit` and `city` (folded, '' when the file gives none),
-- `postal_prefix` (the FSA "M5V" or 5-digit ZIP, '' when the file gives none).
--
-- The unique index is the point's identity: a re-import of the same file inserts nothing,
-- and it serves the lookup, whose first two columns are the street and the number (the
-- latitude and longitude then bound the candidates to the postal code's surroundings).
-- Version 0010 is another issue's (slot capacity); it is applied whenever it ships.
CREATE TABLE address_points (
    number TEXT NOT NULL,
    street TEXT NOT NULL,
    unit TEXT NOT NULL,
    city TEXT NOT NULL,
    postal_prefix TEXT NOT NULL,
    lat DOUBLE PRECISION NOT NULL,
    lng DOUBLE PRECISION NOT NULL
);
CREATE UNIQUE INDEX address_points_key ON address_points (street, number, unit, postal_prefix, city);
